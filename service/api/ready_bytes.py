"""A 200 response of ready bytes: the two ASGI messages, nothing else.

What ``starlette.responses.Response`` sends (the same headers), without its header object,
charset check and background-task hook; the shortcuts that answer from the middleware use it.
"""

from __future__ import annotations

from typing import Any

JSON_TYPE = (b"content-type", b"application/json")


class ReadyBytes:
    """``body`` with ``content-length`` and the ``headers`` given (lower-case byte pairs)."""

    __slots__ = ("body", "headers")

    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.body, self.headers = body, headers

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-length", b"%d" % len(self.body)), *self.headers]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})
