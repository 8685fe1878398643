"""Every error as the one envelope of api.md: ``{error, code, details, request_id}``.

One table maps what can go wrong to a status and a stable code:

==================================  ======  ==========================================
raised                              status  code
==================================  ======  ==========================================
``ApiError`` subclasses             theirs  theirs (``service.errors``)
``RequestValidationError``          422     ``INVALID_INPUT`` (``BAD_REQUEST`` 400 for bad JSON)
Starlette ``HTTPException``         theirs  ``NOT_FOUND``, ``METHOD_NOT_ALLOWED``, ...
anything else (middleware)          500     ``INTERNAL`` — logged with its traceback, never sent
==================================  ======  ==========================================

Messages never echo raw input values: field paths and the problem only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from service.errors import ApiError, BadRequest, ErrorBody, ErrorDetail, InvalidInput, detail
from service.model_types import model_types

REQUEST_ID_HEADER = "X-Request-ID"

#: Model types; a discriminated union puts the tag in error locations, which we drop.
MODEL_TYPE_TAGS = frozenset(model_types())
#: Location parts that name a pydantic union member or validator, not a field.
_TYPE_TAG = re.compile(r"^(?:[a-z-]+\[.*\]|int|float|str|bool|none|list|dict)$")
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
_LOCATION_ROOTS = frozenset({"body", "query", "path", "header", "cookie"})
#: Bound errors re-worded so a bound such as 1e-100 is not spelled out in 100 digits.
_BOUND_WORDS = {
    "greater_than": "greater than",
    "greater_than_equal": "greater than or equal to",
    "less_than": "less than",
    "less_than_equal": "less than or equal to",
}
_BOUND_KEYS = {
    "greater_than": "gt",
    "greater_than_equal": "ge",
    "less_than": "lt",
    "less_than_equal": "le",
}


def request_id_of(request: Request) -> str:
    """The id the middleware gave this request ('-' if it never ran)."""
    return getattr(request.state, "request_id", "-")


def error_response(
    status_code: int,
    code: str,
    message: str,
    request_id: str,
    details: Sequence[ErrorDetail] = (),
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The envelope as a response, with ``X-Request-ID`` set."""
    body = ErrorBody(error=message, code=code, details=list(details), request_id=request_id)
    all_headers = {**(headers or {}), REQUEST_ID_HEADER: request_id}
    return JSONResponse(body.model_dump(), status_code=status_code, headers=all_headers)


def field_path(loc: Iterable[int | str]) -> str:
    """``("body", "params", "C")`` → ``"params.C"``; ``("body", "X", 2)`` → ``"X[2]"``."""
    parts = list(loc)
    if len(parts) > 1 and parts[0] in _LOCATION_ROOTS:
        parts = parts[1:]
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in MODEL_TYPE_TAGS or _TYPE_TAG.match(part):
            continue
        else:
            path += f".{part}" if path else part
    return path or "body"


def _problem(error: Mapping[str, Any]) -> str:
    """pydantic's message, with any quoted copy of the offending value taken out."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind == "union_tag_invalid":
        return (
            f"unknown {ctx.get('discriminator', 'tag')}; expected one of {ctx.get('expected_tags')}"
        )
    if kind == "union_tag_not_found":
        return f"missing {ctx.get('discriminator', 'tag')}"
    bound = ctx.get(_BOUND_KEYS.get(kind, ""))
    if isinstance(bound, float) and bound != 0 and not 1e-6 <= abs(bound) < 1e16:
        return f"Input should be {_BOUND_WORDS[kind]} {bound!r}"
    message = str(error.get("msg", "invalid value"))
    value = error.get("input")
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        message = message.replace(f"'{value}'", "the given value")
    return message


def _empty_problem(field: str) -> str:
    """An empty list, in the words the data checks use for an empty ``X`` or row."""
    if field == "X":
        return "must hold at least one row"
    if re.fullmatch(r"X\[\d+\]", field):
        return "rows must hold at least one value"
    return "must not be empty"


def validation_details(errors: Sequence[Mapping[str, Any]]) -> list[ErrorDetail]:
    """pydantic errors as ``ErrorDetail``s, one per distinct (field, problem)."""
    seen: dict[tuple[str, str], ErrorDetail] = {}
    for error in errors:
        field, problem = field_path(error.get("loc", ())), _problem(error)
        if error.get("type") == "too_short" and (error.get("ctx") or {}).get("min_length") == 1:
            problem = _empty_problem(field)
        seen.setdefault((field, problem), ErrorDetail(field=field, problem=problem))
    return list(seen.values())


def api_error_response(exc: ApiError, request_id: str) -> JSONResponse:
    """An ``ApiError`` as the envelope: its own status, code, details and headers."""
    return error_response(
        exc.status_code, exc.code, exc.message, request_id, exc.details, exc.headers
    )


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    """``ApiError`` → its own status, code and headers."""
    assert isinstance(exc, ApiError)
    return api_error_response(exc, request_id_of(request))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's validation errors → 422 ``INVALID_INPUT``, or 400 when the JSON is unparseable."""
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        error: ApiError = BadRequest(
            "request body could not be parsed", [detail("body", "the body is not valid JSON")]
        )
    else:
        error = InvalidInput("request fields are invalid", validation_details(errors))
    return api_error_response(error, request_id_of(request))


def allowed_methods(request: Request) -> list[str]:
    """Every method some route answers on this request's path (for ``Allow``).

    Asks each route whether it fully matches the request under each method, which works through
    included routers without reading their internals.
    """
    allowed = []
    for method in HTTP_METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in request.app.routes):
            allowed.append(method)
    return allowed


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette/FastAPI ``HTTPException`` (unknown route, wrong method, bad body) → envelope."""
    assert isinstance(exc, StarletteHTTPException)
    status = HTTPStatus(exc.status_code)
    rid = request_id_of(request)
    details: list[ErrorDetail] = []
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"method {request.method} not allowed on {request.url.path}"
        headers = {**headers, "Allow": ", ".join(allowed_methods(request))}
    elif exc.status_code == 400:
        message = "request body could not be parsed"
        details = [detail("body", "the body could not be parsed (bad JSON, or nested too deep)")]
    else:
        message = status.phrase
    return error_response(exc.status_code, status.name, message, rid, details, headers=headers)


def internal_error(request_id: str) -> JSONResponse:
    """The 500 envelope: no exception text, no traceback."""
    message = "internal error; the server log has the details under this request id"
    return api_error_response(ApiError(message), request_id)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers so every error the app raises leaves as the envelope."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
