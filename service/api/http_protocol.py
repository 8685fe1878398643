"""uvicorn's HTTP protocols, with their own 400 (a request the parser refuses) sent as the envelope.

A malformed request line or header, a negative, non-numeric or repeated ``Content-Length``, or a
bad chunk never reaches the app: the parser refuses it and uvicorn answers a plain-text 400
itself. These subclasses write the same 400 as the JSON envelope (code ``BAD_REQUEST``, detail on
``request``, a fresh ``X-Request-ID``) and close the connection, as uvicorn does.
``python -m service`` serves with ``EnvelopeHttpToolsProtocol`` (httptools, the C parser, on
uvloop: ``http=`` and ``loop=`` of ``uvicorn.run``); ``EnvelopeH11Protocol`` is the pure-Python
one, for a platform without httptools.
"""

from __future__ import annotations

import uuid

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.errors import ErrorBody, detail

PROTOCOL_PATH = "service.api.http_protocol:EnvelopeHttpToolsProtocol"
MAX_HEAD_BYTES = 16 * 1024
"""Largest request line plus headers taken (h11's default cap); httptools itself has none."""


def unparseable_request_body(request_id: str) -> bytes:
    """The envelope of a request the HTTP parser refused, as JSON bytes."""
    envelope = ErrorBody(
        error="the HTTP request could not be parsed",
        code="BAD_REQUEST",
        details=[detail("request", "malformed request line, header, Content-Length or chunk")],
        request_id=request_id,
    )
    return envelope.model_dump_json().encode()


def unparseable_request_headers(request_id: str, body: bytes) -> list[tuple[bytes, bytes]]:
    """The headers of that 400: JSON, its length, the request id, and the connection closed."""
    return [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", request_id.encode()),
        (b"connection", b"close"),
    ]


class EnvelopeH11Protocol(H11Protocol):
    """``H11Protocol`` whose parser-level 400 is the JSON envelope instead of plain text."""

    def send_400_response(self, msg: str) -> None:
        request_id = uuid.uuid4().hex
        body = unparseable_request_body(request_id)
        headers = unparseable_request_headers(request_id, body)
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()


class EnvelopeHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` whose parser-level 400 is the JSON envelope instead of plain text.

    The bytes that arrive while a request's line and headers are incomplete are counted, and past
    ``MAX_HEAD_BYTES`` the request is refused with that 400, as h11 does: httptools would buffer
    a header of any size.
    """

    _head_open = True  # a request line and headers are being read
    _head_bytes = 0

    def data_received(self, data: bytes) -> None:
        if self._head_open:
            self._head_bytes += len(data)
        super().data_received(data)
        too_large = self._head_open and self._head_bytes > MAX_HEAD_BYTES
        if too_large and not self.transport.is_closing():  # a head still arriving, already too big
            self.send_400_response("request head too large")

    def on_headers_complete(self) -> None:
        self._head_open = False
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > MAX_HEAD_BYTES:  # a whole head in one read: raised as a parser error, so a 400
            raise ValueError("request head too large")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_open, self._head_bytes = True, 0

    def send_400_response(self, msg: str) -> None:
        request_id = uuid.uuid4().hex
        body = unparseable_request_body(request_id)
        content = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        for name, value in unparseable_request_headers(request_id, body):
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([b"\r\n", body])
        self.transport.write(b"".join(content))
        self.transport.close()
