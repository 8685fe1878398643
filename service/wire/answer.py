"""An encoded answer: the bytes of a response body, its media type and its extra headers."""

from __future__ import annotations

from typing import NamedTuple

JSON_MEDIA_TYPE = "application/json"


class Answer(NamedTuple):
    """What an encoder gives the route to send as a 200."""

    body: bytes
    media_type: str = JSON_MEDIA_TYPE
    headers: dict[str, str] | None = None
