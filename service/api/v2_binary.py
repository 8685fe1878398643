"""V2 requests with binary tensor data, from the middleware: on the infer routes and ``/predict``.

``POST /v2/models/{name}[/versions/{version}]/infer``, or ``POST /predict?model=<ref>`` (which
takes V2 bodies too), carrying ``Inference-Header-Content-Length``, is a JSON object followed by
its inputs' bytes (``service.inference.binary_tensors``), which the routes' JSON bodies cannot
read. The request middleware hands it here after its id, key and body cap: the rows are read
straight into a float64 matrix (no number is parsed from text), scored as the JSON route scores
them (``protocols.score_rows``: the same checks, 404s and 422s, details naming ``inputs[i]...``),
and answered as a V2 response, with the outputs asked for as binary data after its JSON. A model
already in memory with little working memory is scored on the event loop, any other in the
thread pool, as ``/predict``'s shortcut does (``fast_predict.on_loop_when_cheap``). The access
log and metrics name the route's template.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import unquote_plus

from service.api import binary_answer, shortcut
from service.api.content_types import media_type
from service.api.deps import NOT_READY
from service.api.fast_predict import on_loop_when_cheap
from service.api.protocols import require_model, score_rows
from service.api.ready_bytes import ReadyBytes
from service.errors import Unavailable
from service.inference import binary_tensors, formats

Scope = MutableMapping[str, Any]
INFER = re.compile(r"/v2/models/([^/]+)(?:/versions/([^/]+))?/infer")


INFER_ROUTE = shortcut.RouteTemplate("/v2/models/{name}/infer")
VERSION_ROUTE = shortcut.RouteTemplate("/v2/models/{name}/versions/{version}/infer")


def query_value(query: bytes, key: str) -> str | None:
    """The first value of ``key`` in a query string, as ``QueryParams`` reads it (a fifth of
    its cost: only the one key is decoded)."""
    for part in query.decode("latin-1").split("&"):
        name, _, value = part.partition("=")
        if unquote_plus(name) == key:
            return unquote_plus(value)
    return None


def _target(scope: Scope) -> tuple[shortcut.RouteTemplate, str, str] | None:
    """(route, model reference, the field its 404 names) of a path that takes binary tensors."""
    path = scope["path"]
    if path == shortcut.PATH:
        ref = require_model(query_value(scope["query_string"], "model"))
        return shortcut.ROUTE, ref, "model"
    match = INFER.fullmatch(path)
    if match is None:
        return None
    name, version = match.groups()
    if version is None:
        return INFER_ROUTE, name, "name"
    return VERSION_ROUTE, f"{name}:{version}", "version"


async def answer(scope: Scope, body: bytes, headers: dict[bytes, str]) -> ReadyBytes | None:
    """The response to a binary-data infer request, or ``None`` when ``scope`` is not one."""
    if scope["method"] != "POST":
        return None
    length = headers.get(binary_tensors.HEADER_KEY)
    if length is None:
        binary = media_type(headers.get(b"content-type")) == binary_tensors.MEDIA_TYPE
        if binary and (scope["path"] == shortcut.PATH or INFER.fullmatch(scope["path"])):
            problem = f"is required with {binary_tensors.MEDIA_TYPE}: {binary_tensors.MEANING}"
            raise formats.invalid(binary_tensors.HEADER, problem, "bad header")
        return None
    target = _target(scope)
    if target is None:
        return None
    scope["route"], ref, field = target
    state = scope["app"].state
    store = getattr(state, "store", None)
    if store is None:
        raise Unavailable("the model store is not available", headers=NOT_READY)
    request, data = binary_tensors.split(body, length)
    response_id = request.get("id")
    if response_id is not None and type(response_id) is not str:
        raise formats.invalid("id", "must be a string")
    wanted = binary_tensors.binary_outputs(request)
    rows = binary_tensors.rows(request, data)
    outputs = formats.v2_requested(request.get("outputs"))

    def run() -> dict[str, Any]:
        return score_rows(store, state.settings, state.predict_gate, ref, rows, outputs, field)

    out = await on_loop_when_cheap(store, ref, (len(rows.X), len(rows.X[0])), run, field)
    scope["state"]["model_id"] = out["model_id"]
    request_id = response_id or scope["state"]["request_id"]
    return binary_answer.encoded(formats.v2_response(out, request_id), wanted)
