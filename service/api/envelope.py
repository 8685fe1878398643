"""Every error as the one envelope of api.md: ``{error, code, details, request_id}``.

One table maps what can go wrong to a status and a stable code:

==================================  ======  ==========================================
raised                              status  code
==================================  ======  ==========================================
``ApiError`` subclasses             theirs  theirs (``service.errors``)
``BackendUnavailable``              503     ``DATABASE_UNAVAILABLE``, ``STORE_UNAVAILABLE``
``RequestValidationError``          422     ``INVALID_INPUT`` (``BAD_REQUEST`` 400 for bad JSON)
Starlette ``HTTPException``         theirs  ``NOT_FOUND``, ``METHOD_NOT_ALLOWED``, ...
anything else (middleware)          500     ``INTERNAL`` — logged with its traceback, never sent
==================================  ======  ==========================================

Messages never echo raw input values: field paths and the problem only. A back end that is down
is always a 503 with ``Retry-After`` (the repository raises ``BackendUnavailable`` for it, never
the driver's error); its name goes on the request's access line and metrics (``backend``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from service.errors import ApiError, BackendUnavailable, ErrorBody, ErrorDetail, detail
from service.wire.validation import invalid_fields

REQUEST_ID_HEADER = "X-Request-ID"

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


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


def api_error_response(exc: ApiError, request_id: str) -> JSONResponse:
    """An ``ApiError`` as the envelope: its own status, code, details and headers."""
    return error_response(
        exc.status_code, exc.code, exc.message, request_id, exc.details, exc.headers
    )


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    """``ApiError`` → its own status, code and headers."""
    assert isinstance(exc, ApiError)
    if isinstance(exc, BackendUnavailable):
        request.state.backend = exc.backend
    return api_error_response(exc, request_id_of(request))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's validation errors → 422 ``INVALID_INPUT``, or 400 when the JSON is unparseable."""
    assert isinstance(exc, RequestValidationError)
    error = invalid_fields(list(exc.errors()), body_type(request))
    return api_error_response(error, request_id_of(request))


def body_type(request: Request) -> Any:
    """The type of the matched route's JSON body (None without one): it names allowed fields."""
    field = getattr(request.scope.get("route"), "body_field", None)
    return getattr(getattr(field, "field_info", None), "annotation", None)


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
