"""Request bodies are chosen by ``Content-Type``: JSON everywhere, CSV where a route converts it.

``BodyRoute`` is the route class of every route with a body. A body sent with any other media
type — curl's default ``application/x-www-form-urlencoded`` for ``-d``, or no ``Content-Type`` at
all — is refused with 415 before it is parsed, and the envelope names the accepted types and the
curl flag that fixes the request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from service.wire.media import CSV_MEDIA_TYPE, JSON_MEDIA_TYPE, is_csv, is_json, unsupported


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
