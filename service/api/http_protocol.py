"""uvicorn's h11 protocol, with its own 400 (a request h11 cannot parse) sent as the envelope.

A malformed request line or header, a negative, non-numeric or repeated ``Content-Length``, or a
bad chunk never reaches the app: h11 refuses it and uvicorn answers a plain-text 400 itself. This
subclass writes the same 400 as the JSON envelope (code ``BAD_REQUEST``, detail on ``request``,
a fresh ``X-Request-ID``) and closes the connection, as uvicorn does. It is selected by
``python -m service`` (``http=`` of ``uvicorn.run``); the httptools protocol is never used.
"""

from __future__ import annotations

import uuid

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from service.errors import ErrorBody, detail

PROTOCOL_PATH = "service.api.http_protocol:EnvelopeH11Protocol"


def unparseable_request_body(request_id: str) -> bytes:
    """The envelope of a request the HTTP parser refused, as JSON bytes."""
    envelope = ErrorBody(
        error="the HTTP request could not be parsed",
        code="BAD_REQUEST",
        details=[detail("request", "malformed request line, header, Content-Length or chunk")],
        request_id=request_id,
    )
    return envelope.model_dump_json().encode()


class EnvelopeH11Protocol(H11Protocol):
    """``H11Protocol`` whose parser-level 400 is the JSON envelope instead of plain text."""

    def send_400_response(self, msg: str) -> None:
        request_id = uuid.uuid4().hex
        body = unparseable_request_body(request_id)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"x-request-id", request_id.encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()
