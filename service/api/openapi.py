"""The OpenAPI document: error responses for routes, app-wide statuses, and the committed file.

The committed file is written by ``service.api.document`` (``scripts/gen_openapi.py``).

Routes declare their own error statuses with ``responses=error_responses(404, 409, 422)``; the
statuses every route can give (401 when keys are set, 400 for an unparseable body, 405 with
``Allow`` for another method of the path, 408 for a body that stops arriving, 413 from the body
cap, 415 for a body of another media type, 500) are added to every operation here, and FastAPI's own 422 schema is replaced by the one envelope.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from service.api.envelope import HTTP_METHODS
from service.errors import ErrorBody
from service.wire.media import CSV_MEDIA_TYPE

ENVELOPE_REF = "#/components/schemas/ErrorBody"
_FASTAPI_422 = "#/components/schemas/HTTPValidationError"

ERROR_DESCRIPTIONS = {
    400: "The body could not be parsed.",
    401: "Missing or invalid X-API-Key.",
    404: "Unknown model, job or route (ARTIFACT_MISSING: the model's artifact is gone from the "
    "artifact store).",
    405: "Another method of this path; Allow lists them.",
    408: "The body stopped arriving for BSVM_BODY_TIMEOUT_S seconds.",
    409: "The model cannot do that (ARTIFACT_REFUSED: its artifact failed its signature check and "
    "was not loaded).",
    413: "The body is larger than BSVM_MAX_BODY_MB.",
    415: "The body is neither application/json nor (where accepted) text/csv.",
    422: "Invalid fields or data.",
    429: "Too many trainings at once; retry after Retry-After seconds.",
    500: "Unexpected server error (details in the server log under the request id).",
    503: "Not ready or busy; retry after Retry-After seconds.",
}
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer"},
    }
}


def _described(status: int) -> dict[str, Any]:
    """The description of ``status`` and, for 429 and 503, its ``Retry-After`` header."""
    out: dict[str, Any] = {"description": ERROR_DESCRIPTIONS.get(status, HTTPStatus(status).phrase)}
    if status in (429, 503):
        out["headers"] = _RETRY_AFTER
    return out


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` dict declaring each status with the ``ErrorBody`` envelope."""
    return {status: {"model": ErrorBody, **_described(status)} for status in statuses}


def _envelope_response(status: int) -> dict[str, Any]:
    """One response object of the document referring to the envelope."""
    content = {"application/json": {"schema": {"$ref": ENVELOPE_REF}}}
    return {**_described(status), "content": content}


def _method_not_allowed(path_item: dict[str, Any]) -> dict[str, Any]:
    """The 405 of a path: the envelope, and ``Allow`` listing every method of the path."""
    methods = [m for m in HTTP_METHODS if m.lower() in path_item]
    allow = {
        "description": "Every method this path answers.",
        "schema": {"type": "string", "const": ", ".join(methods)},
    }
    return {**_envelope_response(405), "headers": {"Allow": allow}}


def _with_app_wide_statuses(doc: dict[str, Any]) -> dict[str, Any]:
    """Add 413/500 (and 401, 400 where they apply) everywhere; the envelope for FastAPI's 422."""
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    for path_item in doc.get("paths", {}).values():
        for operation in list(path_item.values()):
            responses = operation.setdefault("responses", {})
            if "422" in responses and _FASTAPI_422 in json.dumps(responses["422"]):
                responses["422"] = _envelope_response(422)
            statuses = [413, 500]
            if operation.get("security"):
                statuses.append(401)
            if "requestBody" in operation:
                statuses += [400, 415]  # a body that cannot be parsed, or of another type
            if "requestBody" in operation:
                statuses.append(408)  # the body stopped arriving
            for status in statuses:
                responses.setdefault(str(status), _envelope_response(status))
            responses.setdefault("405", _method_not_allowed(path_item))
            operation["responses"] = dict(sorted(responses.items()))
    for name in ("HTTPValidationError", "ValidationError"):
        if name not in json.dumps(doc.get("paths", {})):
            components.pop(name, None)
    return doc


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The app's document, generated once and cached on the app."""
    if app.openapi_schema is None:
        doc = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        app.openapi_schema = _with_app_wide_statuses(doc)
    return app.openapi_schema


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` return the post-processed document."""
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]


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
