"""Request bodies are chosen by ``Content-Type``: JSON everywhere, CSV where a route converts it.

``BodyRoute`` is the route class of every route with a body. A body sent with any other media
type — curl's default ``application/x-www-form-urlencoded`` for ``-d``, or no ``Content-Type`` at
all — is refused with 415 before it is parsed, and the envelope names the accepted types and the
curl flag that fixes the request.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from service.errors import UnsupportedMediaType, detail

JSON_MEDIA_TYPE = "application/json"
CSV_MEDIA_TYPE = "text/csv"
_PLAIN_MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,62}/[a-z0-9][a-z0-9.+-]{0,62}$")


def media_type(content_type: str | None) -> str:
    """The lower-case ``type/subtype`` of a ``Content-Type`` header ('' when absent)."""
    return (content_type or "").split(";")[0].strip().lower()


def is_json(content_type: str | None) -> bool:
    """True for ``application/json`` and ``application/*+json`` (any parameters)."""
    kind = media_type(content_type)
    return kind == JSON_MEDIA_TYPE or (kind.startswith("application/") and kind.endswith("+json"))


def is_csv(content_type: str | None) -> bool:
    """True for ``text/csv`` (with or without parameters such as charset)."""
    return media_type(content_type) == CSV_MEDIA_TYPE


def unsupported(content_type: str | None, accepted: tuple[str, ...]) -> UnsupportedMediaType:
    """The 415 error: what was sent (when it is a plain media type), what is accepted, the fix."""
    kind = media_type(content_type)
    if not kind:
        sent = "the request has no Content-Type header"
    elif _PLAIN_MEDIA_TYPE.match(kind):
        sent = f"Content-Type {kind} is not accepted"
    else:
        sent = "this Content-Type is not accepted"
    fix = f"add -H 'Content-Type: {JSON_MEDIA_TYPE}' for a JSON body"
    if CSV_MEDIA_TYPE in accepted:
        fix += f", or -H 'Content-Type: {CSV_MEDIA_TYPE}' with --data-binary @file.csv for CSV"
    if kind == "application/x-www-form-urlencoded":
        fix += " (curl -d sends application/x-www-form-urlencoded unless told otherwise)"
    return UnsupportedMediaType(
        f"{sent}; send {' or '.join(accepted)}",
        [detail("Content-Type", f"must be {' or '.join(accepted)}: {fix}")],
    )


class BodyRoute(APIRoute):
    """A route whose body must be JSON (415 otherwise); ``accepted`` lists its media types."""

    accepted: tuple[str, ...] = (JSON_MEDIA_TYPE,)

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler
        accepted = self.accepted

        async def checked_handler(request: Request) -> Response:
            content_type = request.headers.get("content-type")
            known = is_json(content_type) or (CSV_MEDIA_TYPE in accepted and is_csv(content_type))
            if not known and (content_type is not None or await request.body()):
                raise unsupported(content_type, accepted)
            return await handler(request)

        return checked_handler
