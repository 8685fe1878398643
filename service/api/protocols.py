"""Other servers' bodies on ``POST /predict``, and ``Accept: text/csv`` answers.

``POST /predict`` tells the format from the body's keys (``service.inference.formats``): our own
``{"model", "X", ...}``; MLflow's ``dataframe_split``, ``dataframe_records``, ``instances``,
``inputs``; KServe V1's ``instances``; the Open Inference Protocol's ``inputs`` tensors. Foreign
bodies carry no model reference, so the model is the query's ``?model=<ref>`` (any reference
``/predict`` takes); each is answered in its own protocol's shape. Errors keep our envelope
``{error, code, details, request_id}``: its ``error`` string is what V2 asks for, and ``details``
name the field as the sender wrote it (``dataframe_split.data[2][1]``, ``inputs[0].shape``).

The API key was already checked by the middleware before any of this runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from service.api import binary_answer
from service.api.binary_answer import wants_binary
from service.api.csv_answer import csv_text
from service.api.csv_bodies import CSV_MEDIA_TYPE, CsvRoute, is_csv
from service.api.deps import get_predict_gate, get_settings, get_store
from service.api.envelope import request_id_of
from service.errors import InvalidInput, detail
from service.inference import binary_tensors, formats
from service.inference import predict as prediction
from service.inference.signature import outputs_of


class Scoring:
    """What ``prediction.predict`` reads off a body."""

    def __init__(self, model: str, rows: formats.Rows, outputs: list[str]) -> None:
        self.model, self.X, self.feature_names = model, rows.X, rows.feature_names
        self.outputs, self.level = outputs, 0.95


def score_rows(
    store: Any,
    settings: Any,
    gate: Any,
    ref: str,
    rows: formats.Rows,
    outputs: list[str] | None,
    field: str = "model",
) -> dict[str, Any]:
    """Our outputs (``outputs``; ``None``: every one the model has) for ``rows`` scored with
    model ``ref``, whose 404 names ``field``; 422 details name fields as the sender wrote them."""
    model_id = store.resolve(ref, field)
    if outputs is None:
        outputs = outputs_of(store.load(model_id))
    try:
        with gate.slot():
            return prediction.predict(store, settings, Scoring(model_id, rows, outputs))
    except InvalidInput as exc:
        exc.details = formats.renamed(exc.details, rows)
        raise


def score(
    request: Request, ref: str, fmt: str, body: dict[str, Any], field: str = "model"
) -> dict[str, Any]:
    """Our outputs for a foreign body ``body`` of format ``fmt`` scored with model ``ref``."""
    store, settings, gate = get_store(request), get_settings(request), get_predict_gate(request)
    if fmt == formats.V2:
        rows = formats.v2_rows(body.get("inputs"))
        outputs = formats.v2_requested(body.get("outputs"))
    else:
        rows, outputs = formats.mlflow_rows(fmt, body), ["label"]
    out = score_rows(store, settings, gate, ref, rows, outputs, field)
    request.state.model_id = out["model_id"]
    return out


def answer(request: Request, ref: str, fmt: str, body: dict[str, Any], field: str = "model"):
    """The protocol's own response to a foreign body (a V2 one with binary outputs when it asks
    for them: a ready ``Response``)."""
    wanted = binary_tensors.binary_outputs(body) if fmt == formats.V2 else {}
    out = score(request, ref, fmt, body, field)
    if fmt != formats.V2:
        return formats.predictions(out)
    response = formats.v2_response(out, str(body.get("id") or request_id_of(request)))
    return binary_answer.respond(response, wanted) if wants_binary(wanted) else response


def model_from_query(request: Request) -> str:
    """``?model=`` of a foreign body on ``/predict`` (422 naming ``model`` when absent)."""
    return require_model(request.query_params.get("model"))


def require_model(ref: str | None) -> str:
    """The ``?model=`` query value given (422 naming ``model`` when absent or empty)."""
    if not ref:
        raise InvalidInput(
            "this body names no model; give it in the query",
            [detail("model", "query parameter ?model=<ref> is required with this body format")],
        )
    return ref


def _json_object(raw: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or ``None`` (FastAPI then reports what is wrong with it)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class ProtocolRoute(CsvRoute):
    """``CsvRoute`` that also answers MLflow, KServe V1 and V2 bodies in their own shapes."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()

        async def protocol_handler(request: Request) -> Response:
            content_type = request.headers.get("content-type")
            if request.method == "POST" and not is_csv(content_type):
                body = _json_object(await request.body())
                fmt = formats.body_format(body) if body is not None else None
                if body is not None and fmt is not None:
                    ref = model_from_query(request)
                    result = await run_in_threadpool(answer, request, ref, fmt, body)
                    return result if isinstance(result, Response) else JSONResponse(result)
            return await handler(request)

        return protocol_handler


PLAIN_ACCEPTS = frozenset({"*/*", "application/json"})
"""The commonest ``Accept`` values, which do not ask for CSV (answered without parsing)."""


def wants_csv(accept: str | None) -> bool:
    """True when ``Accept`` prefers ``text/csv`` to JSON (highest q wins; ties: first listed)."""
    if accept is None or accept in PLAIN_ACCEPTS:
        return False
    best, best_q = None, 0.0
    for part in (accept or "").split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        media = media.lower()
        known = media in (CSV_MEDIA_TYPE, "application/json", "*/*", "text/*", "application/*")
        if known and q > best_q:
            best, best_q = media, q
    return best in (CSV_MEDIA_TYPE, "text/*")


def as_csv(out: dict[str, Any]) -> Response:
    """Our outputs as ``text/csv`` (a header row, then one row per input row)."""
    headers = {"X-Model-ID": out["model_id"], "X-Model-Version": str(out["version"])}
    return Response(csv_text(out), media_type=CSV_MEDIA_TYPE, headers=headers)


def respond(request: Request, out: dict[str, Any]) -> Any:
    """``out`` as CSV when the request's ``Accept`` prefers it, else unchanged (JSON)."""
    return as_csv(out) if wants_csv(request.headers.get("accept")) else out


def with_model_query(extra: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` whose ``model`` query parameter also serves MLflow and KServe bodies."""
    for parameter in extra.get("parameters", []):
        if parameter["name"] == "model":
            parameter["description"] = (
                "Model reference (id, name, name@alias, name:version): required with text/csv "
                "and with MLflow or KServe bodies; our own JSON body names its model instead."
            )
    return extra


#: ``openapi_extra`` fragment: the 200 of ``/predict`` also comes as ``text/csv``.
CSV_RESPONSE = {
    200: {
        "description": "Outputs as JSON, or as CSV when `Accept: text/csv` is sent: a header "
        "row `label, decision_<class>..., probability_<class>..., interval_lower[_<class>]..., "
        "interval_upper[_<class>]...` (the outputs asked for) and one row per input row. "
        "MLflow/KServe bodies are answered in their own shapes (see the description).",
        "content": {CSV_MEDIA_TYPE: {"schema": {"type": "string"}}},
    }
}
