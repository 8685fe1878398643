"""The predict pipeline, entered from routing: decode (``service.wire``) → score → encode.

``PredictRoute`` is the route class of every route that scores rows read from its own body:
``POST /predict`` and the Open Inference Protocol's ``POST /v2/models/{name}[/versions/{v}]/infer``.
The router picks the route; its handler reads the body's bytes (already capped by the request
middleware), picks the codec from ``Content-Type``, the binary-data header and the body's keys,
decodes the body into one ``PredictQuery``, scores it with ``inference.predict.score`` and encodes
the outputs in the answer shape of that codec. The route's endpoint function is never called: its
signature declares the JSON body for the OpenAPI document, and ``openapi_extra`` the other bodies
the same handler reads. Errors are raised, and answered by the app's exception handlers.

==============================  ==================================  ==============================
body                            decoder                             answer
==============================  ==================================  ==============================
ours, JSON                      ``wire.ours``                       ``PredictResponse`` JSON, or
ours, ``text/csv``              ``wire.csv_bodies``                 CSV (``Accept: text/csv``)
MLflow, KServe V1 (JSON)        ``wire.sniff`` → ``wire.mlflow``    ``{"predictions": [...]}``
V2 tensors (JSON)               ``wire.sniff`` → ``wire.v2``        V2 response (``wire.v2_binary``)
V2 binary tensor data           ``wire.v2_binary``                  V2 response, JSON or binary
==============================  ==================================  ==============================

``/invocations`` and ``/v1/models/{name}:predict`` take JSON only: FastAPI reads their bodies,
and they go on through the same decoders, ``scored`` and encoders (``routes/v2.py``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from service.api.deps import store_of
from service.api.known_query import check_query
from service.errors import ApiError, InvalidInput, detail
from service.inference import predict as prediction
from service.inference.query import PredictQuery, rows_shape
from service.inference.servable import Servable
from service.repository.store import ModelStore
from service.schemas.v2 import InferenceRequest
from service.wire import csv_bodies, mlflow, ours, sniff, v2, v2_binary
from service.wire.answer import Answer
from service.wire.media import (
    BINARY_MEDIA_TYPE,
    CSV_MEDIA_TYPE,
    JSON_MEDIA_TYPE,
    is_json_media,
    media_type,
    unsupported,
)
from service.wire.rows import invalid
from service.wire.validation import validated

T = TypeVar("T")
INLINE_BYTES = 2**20
"""Predicts whose working memory (rows × bytes per row) is at most this run on the event loop."""
INLINE_BODY_BYTES = 2**16
"""Bodies up to this size are decoded on the event loop; larger ones in the thread pool."""
ACCEPTED = (JSON_MEDIA_TYPE, CSV_MEDIA_TYPE)
"""Media types of ``/predict`` bodies named in its 415 (binary tensor data has its header)."""


def _ready(store: ModelStore, ref: str, n_rows: int) -> Servable | None:
    """The ``Servable`` of ``ref`` when scoring ``n_rows`` rows with it needs no I/O and little
    memory (its model was readied for scoring by an earlier predict), else None."""
    ready = store.prepared_in_memory(ref)
    if isinstance(ready, Servable) and n_rows * ready.per_row <= INLINE_BYTES:
        return ready
    return None


async def on_loop_when_cheap(
    store: ModelStore,
    ref: str,
    shape: tuple[int, int],
    run: Callable[[Servable | None], T],
    field: str,
) -> T:
    """``run(ready)`` on the event loop when the model of ``ref`` is in memory (its ``Servable``
    ``ready``) and rows of ``shape`` need little working memory; else ``run(None)`` in the thread
    pool."""
    ready = _ready(store, ref, shape[0])
    if ready is None:
        # the reference needs the registry (its cached resolution lapsed): ask it off the loop,
        # holding no predict slot (a query, not a model's memory), then look again
        with contextlib.suppress(ApiError):  # run() raises it again, with its envelope
            await run_in_threadpool(store.resolve, ref, field)
        ready = _ready(store, ref, shape[0])
        if ready is None:
            return await run_in_threadpool(run, None)
    return run(ready)


class Call:
    """One predict request as the pipeline reads it: the ASGI scope, the body, and the three
    headers it looks at, read in one pass over the scope (no ``Request`` or ``Headers`` object)."""

    __slots__ = (
        "_query",
        "accept",
        "binary_length",
        "body",
        "content_type",
        "csv",
        "json",
        "media",
        "scope",
    )

    def __init__(self, scope: Scope, body: bytes) -> None:
        self.scope, self.body = scope, body
        self._query: QueryParams | None = None
        content_type = accept = binary_length = None  # the first of each
        for key, value in scope["headers"]:
            if key == b"content-type":
                if content_type is None:
                    content_type = value.decode("latin-1")
            elif key == b"accept":
                if accept is None:
                    accept = value.decode("latin-1")
            elif key == _BINARY_LENGTH and binary_length is None:
                binary_length = value.decode("latin-1")
        self.content_type, self.accept, self.binary_length = content_type, accept, binary_length
        if self.content_type == JSON_MEDIA_TYPE:  # the usual header, already its media type
            self.media, self.json, self.csv = JSON_MEDIA_TYPE, True, False
        else:
            self.media = media_type(self.content_type)
            self.json = is_json_media(self.media)
            self.csv = self.media == CSV_MEDIA_TYPE

    @property
    def query(self) -> QueryParams:
        """The query string's parameters (parsed when first asked for)."""
        if self._query is None:
            self._query = QueryParams(self.scope.get("query_string", b""))
        return self._query

    @property
    def state(self) -> Any:
        """The app's state: settings, store, predict gate, batcher."""
        return self.scope["app"].state

    @property
    def app_state(self) -> dict[str, Any]:
        """The app's state as a dict: Starlette's ``State`` keeps its values in ``_state``, read
        there without a ``State.__getattr__`` call per value."""
        return self.scope["app"].state._state

    @property
    def request_id(self) -> str:
        """The id the request middleware gave this request."""
        return self.scope.get("state", {}).get("request_id", "-")


_BINARY_LENGTH = v2_binary.HEADER_KEY


async def read_body(receive: Receive) -> bytes:
    """The request's body: what the request middleware read and capped, handed on whole (one
    message, the usual case, without a list of chunks)."""
    message = await receive()
    if message["type"] != "http.request":
        return b""
    body = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _rows(query: PredictQuery) -> int:
    """The number of rows of the query's ``X``."""
    X = query.X
    return X.shape[0] if type(X) is np.ndarray else rows_shape(query)[0]


async def scored(call: Call, query: PredictQuery) -> dict[str, Any]:
    """Our outputs for ``query`` (``inference.predict.score``): on the loop when the model is in
    memory and the work small, else in the thread pool; with micro-batching on, in the pool,
    where concurrent one-row requests can meet."""
    state = call.app_state
    store = state.get("store")
    if store is None:
        store = store_of(call.state)  # its 503
    batcher = state["predict_batcher"]
    settings, gate = state["settings"], state["predict_gate"]
    ready = None if batcher is not None else _ready(store, query.model, _rows(query))
    if ready is not None:  # the usual case: scored here, with no closure or coroutine of its own
        out = prediction.score(store, settings, gate, query, None, ready)
    else:

        def run(ready: Servable | None = None) -> dict[str, Any]:
            return prediction.score(store, settings, gate, query, batcher, ready)

        if batcher is not None:
            out = await run_in_threadpool(run)
        else:
            out = await on_loop_when_cheap(
                store, query.model, rows_shape(query), run, query.model_field
            )
    call.scope["state"]["model_id"] = out["model_id"]
    return out


async def off_loop_when_large(body: bytes, decode: Callable[[], T]) -> T:
    """``decode()`` on the loop for a small ``body``, in the thread pool for a large one."""
    if len(body) <= INLINE_BODY_BYTES:
        return decode()
    return await run_in_threadpool(decode)


class JsonAnswered(Response):
    """The 200 response of a JSON answer without extra headers: the status and headers
    (``content-length``, ``content-type``) of ``Response(body, media_type=JSON_MEDIA_TYPE)``,
    set without its general path."""

    media_type = JSON_MEDIA_TYPE

    def __init__(self, body: bytes) -> None:
        self.status_code = 200
        self.background = None
        self.body = body
        self.raw_headers = [(b"content-length", str(len(body)).encode()), _JSON_CONTENT_TYPE]


_JSON_CONTENT_TYPE = (b"content-type", JSON_MEDIA_TYPE.encode("latin-1"))


def respond(answer: Answer) -> Response:
    """An encoded answer as the 200 response."""
    if answer.media_type == JSON_MEDIA_TYPE and answer.headers is None:
        return JsonAnswered(answer.body)
    return Response(answer.body, media_type=answer.media_type, headers=answer.headers)


def require_model(ref: str | None) -> str:
    """The ``?model=`` query value given (422 naming ``model`` when absent or empty)."""
    if not ref:
        raise InvalidInput(
            "this body names no model; give it in the query",
            [detail("model", "query parameter ?model=<ref> is required with this body format")],
        )
    return ref


def _json_object(raw: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or ``None`` (the decoder then reports what is wrong with it)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _binary_length(call: Call) -> str | None:
    """``Inference-Header-Content-Length``; 422 when a binary body comes without it."""
    if call.binary_length is None and call.media == BINARY_MEDIA_TYPE:
        problem = f"is required with {BINARY_MEDIA_TYPE}: {v2_binary.MEANING}"
        raise invalid(v2_binary.HEADER, problem, "bad header")
    return call.binary_length


async def binary_infer(call: Call, length: str, ref: str, field: str) -> Response:
    """A V2 request with binary tensor data, answered as V2 (binary outputs when asked)."""
    store_of(call.state)  # 503 before the body is looked at, as for every predict
    body = call.body
    query, v2_request = await off_loop_when_large(
        body, lambda: v2_binary.decode(body, length, ref, field)
    )
    out = await scored(call, query)
    return respond(v2_binary.answer(out, v2_request, call.request_id))


async def predict(call: Call) -> Response:
    """``POST /predict``: every body it takes, by ``Content-Type`` and then by the body's keys."""
    body, content_type = call.body, call.content_type
    length = _binary_length(call)
    if length is not None:
        return await binary_infer(call, length, require_model(call.query.get("model")), "model")
    csv = call.csv
    value: dict[str, Any] | None = None  # the body as a JSON object, once read
    if not csv:
        query = ours.fast_body(body) if call.json else None
        if query is None:
            value = await off_loop_when_large(body, lambda: _json_object(body))
            fmt = sniff.body_format(value) if value is not None else None
            if fmt is not None:
                ref = require_model(call.query.get("model"))
                return await foreign(call, fmt, value, ref)
    if csv:
        store = call.state.store
        query = await run_in_threadpool(csv_bodies.decode_predict, body, call.query, store)
    elif query is None:
        if not call.json and (content_type is not None or body):
            raise unsupported(content_type, ACCEPTED)
        if value is None:  # not an object: read again for FastAPI's own 400 or 422
            value = await off_loop_when_large(body, lambda: ours.json_value(body))
        store_of(call.state)  # 503 before the fields are checked, as FastAPI's dependencies
        query = await off_loop_when_large(body, lambda: ours.validate(value))
    out = await scored(call, query)
    return respond(ours.answer(out, call.accept))


async def foreign(
    call: Call, fmt: str, value: dict[str, Any], ref: str, field: str = "model"
) -> Response:
    """Another server's JSON body (format ``fmt``, read as ``value``) scored with model ``ref``,
    answered in its own protocol's shape."""
    store_of(call.state)
    if fmt == sniff.V2:
        v2_binary.binary_outputs(value)  # its 422s first
        query = await off_loop_when_large(call.body, lambda: v2.decode(value, ref, field))
        out = await scored(call, query)
        return respond(v2_binary.answer(out, value, call.request_id))
    query = await off_loop_when_large(call.body, lambda: mlflow.decode(fmt, value, ref, field))
    return respond(mlflow.answer(await scored(call, query)))


async def infer(call: Call) -> Response:
    """``POST /v2/models/{name}[/versions/{version}]/infer``: V2 tensors, JSON or binary."""
    params = call.scope["path_params"]
    name, version = params["name"], params.get("version")
    ref, field = (name, "name") if version is None else (f"{name}:{version}", "version")
    length = _binary_length(call)
    if length is not None:
        return await binary_infer(call, length, ref, field)
    body, content_type = call.body, call.content_type
    if not call.json and (content_type is not None or body):
        raise unsupported(content_type, (JSON_MEDIA_TYPE,))

    value = await off_loop_when_large(body, lambda: ours.json_value(body))

    def decode() -> tuple[PredictQuery, dict[str, Any]]:
        v2_request = validated(InferenceRequest, value).model_dump()
        v2_binary.binary_outputs(v2_request)
        store_of(call.state)
        return v2.decode(v2_request, ref, field), v2_request

    query, v2_request = await off_loop_when_large(body, decode)
    out = await scored(call, query)
    return respond(v2_binary.answer(out, v2_request, call.request_id))


HANDLERS = {"predict": predict, "infer": infer}
"""The pipeline's entry by the kind of route that declares it."""


class PredictRoute(APIRoute):
    """A route answered by the predict pipeline (module docstring).

    An ``APIRoute`` for the router and the OpenAPI document (its endpoint's signature and
    ``openapi_extra`` declare the bodies); ``handle`` — Starlette's per-route extension point —
    serves a request of its methods straight from the ASGI scope: no dependency solving, no body
    parsing by FastAPI, no per-request exit stacks. Anything it raises goes up through the router
    to the app's exception handlers; another method gets the route's own 405.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        self.serve = HANDLERS["infer" if path.endswith("/infer") else "predict"]

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in self.methods:
            await super().handle(scope, receive, send)  # the 405 with Allow
            return
        check_query(scope, self)
        response = await self.serve(Call(scope, await read_body(receive)))
        await response(scope, receive, send)
