"""Per-request context as a pure ASGI middleware.

For every HTTP request, in order: give it a request id (echoed as ``X-Request-ID`` on every
response); check the API key (401, before any body is read); cap the body (413, from
``Content-Length`` and again by counting the bytes as they stream in; 408 when the body stops
arriving for ``body_timeout_s``); run the app with the body read, turning any unexpected
exception into the 500 envelope; then write one JSON log line and the request metrics. The line's
fields are bound for the request (``service.logs.note_request``), so a layer below can add one: a
predict answered from a stale registry answer is ``"stale": true``, a 503 for a back end that is
down names it (``"backend": "database"``), and both are counted in the metrics.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.auth import API_KEY_HEADER, check_api_key
from service.api.body_read import StallWatch, read_capped_body, replay, too_large
from service.api.envelope import REQUEST_ID_HEADER, api_error_response, internal_error
from service.api.metrics import Metrics
from service.api.request_ids import fresh_ids
from service.errors import ApiError, BackendUnavailable
from service.logs import bind_request_fields, log_direct, unbind_request_fields
from service.settings import Settings

access_log = logging.getLogger("service.access")
_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
UNMATCHED_ROUTE = "<unmatched>"


REQUEST_ID_HEADER_KEY = REQUEST_ID_HEADER.lower().encode()
API_KEY_HEADER_KEY = API_KEY_HEADER.lower().encode()


def wanted_headers(scope: Scope) -> tuple[str | None, str | None, str | None]:
    """(request id, API key, ``Content-Length``): the first of each header the middleware reads,
    in one pass over the scope's headers (named in lower case, as ASGI servers and Starlette's
    ``Headers`` have them)."""
    request_id = api_key = length = None
    for key, value in scope["headers"]:
        if key == b"content-length":
            if length is None:
                length = value.decode("latin-1")
        elif key == REQUEST_ID_HEADER_KEY:
            if request_id is None:
                request_id = value.decode("latin-1")
        elif key == API_KEY_HEADER_KEY and api_key is None:
            api_key = value.decode("latin-1")
    return request_id, api_key, length


def set_header(message: Message, key: bytes, value: bytes) -> None:
    """Set header ``key`` (lower case) of a response-start ``message`` to ``value``.

    As ``MutableHeaders(scope=message)[key] = value``: the first header of that name is replaced
    in place and any later ones dropped, else the header is appended; without building the
    wrapper and encoding the name on every response.
    """
    given = message.get("headers", ())
    for name, _ in given:
        if name == key:
            break
    else:  # not there (the usual case): appended
        message["headers"] = [*given, (key, value)]
        return
    headers = list(given)
    found = [i for i, (name, _) in enumerate(headers) if name == key]
    headers[found[0]] = (key, value)
    for i in reversed(found[1:]):
        del headers[i]
    message["headers"] = headers


def new_request_id(incoming: str | None) -> str:
    """The caller's ``X-Request-ID`` when it is short and plain, else 32 fresh random hex digits
    (``request_ids``)."""
    if incoming and _CLIENT_REQUEST_ID.match(incoming):
        return incoming
    return fresh_ids.next()


def route_template(scope: Scope) -> str:
    """The matched route's path template (``/models/{model_id}``), never the raw path."""
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str):
        return path
    if scope.get("endpoint") is not None and scope.get("root_path"):
        return f"{scope['root_path']}/{{path}}"  # a mounted app, e.g. the docs assets
    return UNMATCHED_ROUTE


class RequestContextMiddleware:
    """Request id, API key, body cap, the 500 envelope, access log and request metrics."""

    def __init__(self, app: ASGIApp, settings: Settings, metrics: Metrics) -> None:
        self.app = app
        self.settings = settings
        self.metrics = metrics
        self.max_body = int(settings.max_body_mb * 1024 * 1024)
        self.stall_watch = StallWatch(settings.body_timeout_s)

    def _check_declared_length(self, declared: str | None) -> None:
        """413 at once when ``Content-Length`` (``declared``) already says the body is too large.

        A malformed ``Content-Length`` never gets here (the HTTP server rejects it); the streamed
        count in ``read_capped_body`` is the check that cannot be lied to.
        """
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise too_large(self.max_body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        incoming_id, api_key, declared_length = wanted_headers(scope)
        request_id = new_request_id(incoming_id)
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        request_id_value = request_id.encode("latin-1")
        response_status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal response_status, response_started
            if message["type"] == "http.response.start":
                response_started = True
                response_status = message["status"]
                set_header(message, REQUEST_ID_HEADER_KEY, request_id_value)
            await send(message)

        bound = bind_request_fields(state)
        try:
            check_api_key(self.settings, scope["path"], api_key)
            self._check_declared_length(declared_length)
            body = await read_capped_body(receive, self.max_body, self.stall_watch)
            await self.app(scope, replay(body, receive), send_with_id)
        except ApiError as exc:
            if isinstance(exc, BackendUnavailable):
                state["backend"] = exc.backend
            await api_error_response(exc, request_id)(scope, receive, send_with_id)
        except Exception:
            access_log.exception("unhandled error (request_id=%s)", request_id)
            if response_started:
                raise
            await internal_error(request_id)(scope, receive, send_with_id)
        finally:
            unbind_request_fields(bound)
            self._record(scope, state, request_id, response_status, started)

    def _record(
        self, scope: Scope, state: dict[str, Any], request_id: str, status: int, started: float
    ) -> None:
        """One structured log line and the request metrics."""
        seconds = time.perf_counter() - started
        route = route_template(scope)
        self.metrics.observe_request(scope["method"], route, status, seconds)
        backend = state.get("backend")
        stale = state.get("stale") and status < 400  # an answer that still needed the database
        if backend is not None:
            self.metrics.observe_outage(backend, route)
        if stale:
            self.metrics.observe_stale(route)
        if not access_log.isEnabledFor(logging.INFO):
            return
        fields = {
            "request_id": request_id,
            "method": scope["method"],
            "route": route,
            "path": scope["path"],
            "status": status,
            "latency_ms": round(seconds * 1000, 3),
            "model_id": state.get("model_id"),
        }
        if backend is not None:
            fields["backend"] = backend
        if stale:
            fields["stale"] = True
        log_direct(access_log, logging.INFO, "request", fields)
