"""``POST /train`` with a ``text/csv`` body: the CSV turned into the route's JSON payload.

``CsvRoute`` converts such a body (``wire.csv_bodies.train_payload``) before FastAPI validates
it, so both content types go through one schema and one set of checks. The query is the CSV
body's: with a JSON body any query parameter is a 422 (the body carries it).

A JSON body is read by orjson (a breast-cancer training body of 140 kB: 0.4 ms against 3.2 ms for
the standard library's reader, which FastAPI would use); a body orjson refuses (``NaN``, a lone
surrogate) is left to FastAPI's own reading, so what is accepted, and every error, stays as it
was. So is a body with a run of 19 digits or more: orjson reads an integer past 64 bits as a
float (``-9223372036854775809`` as ``-9.223372036854776e18``) where the standard library keeps it
exact, and a label rounded so would train a model on another class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from service.api.content_types import BodyRoute
from service.errors import InvalidInput, detail
from service.wire.csv_bodies import train_payload
from service.wire.media import CSV_MEDIA_TYPE, JSON_MEDIA_TYPE, is_csv, is_json

DIGITS_AS_NINES = bytes(0x39 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
"""``bytes.translate`` table: every digit to ``9``, anything else to a space."""
LONG_DIGITS = b"9" * 19
"""19 digits in a row: an integer that may not fit in 64 bits (orjson would read it as a float).
Found by ``translate`` and ``in`` (0.13 ms on a 140 kB body; a regex search took 1.4 ms, three
times orjson's own read)."""


class _ParsedRequest(Request):
    """A request whose body was already read and converted to a JSON value (its Content-Type
    then says JSON)."""

    def __init__(self, request: Request, raw: bytes, payload: Any) -> None:
        scope = request.scope
        if not is_json(request.headers.get("content-type")):
            scope = dict(scope)
            scope["headers"] = [
                (k, v) for k, v in request.scope["headers"] if k.lower() != b"content-type"
            ] + [(b"content-type", b"application/json")]
        super().__init__(scope, request.receive)
        self._raw, self._payload = raw, payload

    async def body(self) -> bytes:
        return self._raw or b" "

    async def json(self) -> Any:
        return self._payload


def fast_json(raw: bytes) -> Any | None:
    """``raw`` read by orjson; None when it is empty or orjson refuses it (FastAPI reads it then,
    with the standard library, and answers as it always has)."""
    if not raw or LONG_DIGITS in raw.translate(DIGITS_AS_NINES):
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


class CsvRoute(BodyRoute):
    """A route that also accepts ``text/csv``, converted to its JSON payload by ``convert``."""

    accepted = (JSON_MEDIA_TYPE, CSV_MEDIA_TYPE)
    convert: Callable[[bytes, QueryParams, Any], dict[str, Any]] = staticmethod(train_payload)

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()
        convert = self.convert

        async def csv_handler(request: Request) -> Response:
            if is_csv(request.headers.get("content-type")):
                raw = await request.body()
                store = getattr(request.app.state, "store", None)
                payload = await run_in_threadpool(convert, raw, request.query_params, store)
                request = _ParsedRequest(request, raw, payload)
            elif request.query_params:
                raise InvalidInput(
                    "query parameters are for text/csv bodies",
                    [
                        detail(key[:64], "only with a text/csv body; a JSON body carries it")
                        for key in dict.fromkeys(request.query_params.keys())
                    ],
                )
            elif is_json(request.headers.get("content-type")):
                raw = await request.body()
                payload = fast_json(raw)
                if payload is not None:
                    request = _ParsedRequest(request, raw, payload)
            return await handler(request)

        return csv_handler


def csv_openapi(
    body: str,
    query: dict[str, str],
    arrays: tuple[str, ...] = (),
    example: str | None = None,
    query_examples: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``openapi_extra`` declaring the CSV body (with an example) and its CSV-only query."""
    string: dict[str, Any] = {"type": "string"}
    media: dict[str, Any] = {"schema": {**string, "description": body}}
    if example is not None:
        media["example"] = example
    parameters = []
    for name, text in query.items():
        parameter = {
            "name": name,
            "in": "query",
            "required": False,
            "schema": {"type": "array", "items": string} if name in arrays else string,
            "description": f"text/csv only: {text}",
        }
        if name in (query_examples or {}):
            parameter["example"] = (query_examples or {})[name]
        parameters.append(parameter)
    return {"requestBody": {"content": {CSV_MEDIA_TYPE: media}}, "parameters": parameters}
