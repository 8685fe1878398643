"""``POST /predict`` of our own JSON body answered from the request middleware, past the router.

After ``RequestContextMiddleware`` has given the request its id, checked its key and read its
capped body, a ``POST /predict`` whose body ``fast_predict.fast_body`` reads with certainty is
scored and answered here: no exception middleware, route matching, ``Request`` object or
dependency resolution, which cost as much as scoring one row. Everything else, and every body the
reader is unsure of, goes on to the app, whose ``/predict`` route answers exactly as before (the
same 4xx envelopes; ``PredictRequest`` stays the declared body, so the OpenAPI document does not
change). An ``ApiError`` raised while scoring (404, 409, 422, 503) leaves through the middleware,
which writes the same envelope as the app's handler. The access log and request metrics name the
route ``/predict`` as for any other request.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from starlette.responses import Response

from service.api import fast_predict
from service.api.content_types import is_json
from service.api.protocols import as_csv, wants_csv
from service.api.ready_bytes import ReadyBytes

PATH = "/predict"
Scope = MutableMapping[str, Any]


class RouteTemplate:
    """What the access log and metrics read off ``scope["route"]``: the path template."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path


ROUTE = RouteTemplate(PATH)


async def answer(
    scope: Scope, body: bytes, headers: dict[bytes, str]
) -> Response | ReadyBytes | None:
    """The response to ``scope`` with ``body`` if this module serves it, else ``None``.

    ``headers`` are the request's first ``content-type`` and ``accept`` headers (and others)
    by lower-case name, as the middleware read them.
    """
    if scope["path"] != PATH or scope["method"] != "POST":
        return None
    accept = headers.get(b"accept")
    if not is_json(headers.get(b"content-type")):
        return None
    state = scope["app"].state
    store = getattr(state, "store", None)
    if store is None:  # the app answers its 503
        return None
    own = fast_predict.fast_body(body)
    if own is None:
        return None
    scope["route"] = ROUTE
    batcher = getattr(state, "predict_batcher", None)
    out = await fast_predict.score(store, state.settings, state.predict_gate, own, batcher=batcher)
    scope["state"]["model_id"] = out["model_id"]
    return as_csv(out) if wants_csv(accept) else fast_predict.as_json(out)
