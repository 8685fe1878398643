"""Other servers' scoring routes: Open Inference Protocol (KServe V2), KServe V1, MLflow.

``{name}`` is any model reference ``/predict`` takes (id, name, ``name@alias``,
``name:version``); ``/versions/{version}`` picks ``name:version``. ``/v2/health/*`` is open like
``/health/*``; every other route here needs the API key when keys are set. Errors use our
envelope, whose ``error`` string is the protocol's error object.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

from service import __version__
from service.api import binary_openapi
from service.api.binary_openapi import V2_ANSWER
from service.api.content_types import BodyRoute
from service.api.deps import StoreDep
from service.api.openapi import error_responses
from service.api.predict_route import Call, PredictRoute, foreign
from service.errors import InvalidInput, detail
from service.inference.signature import describe
from service.schemas.v2 import (
    IRIS_ROWS,
    InferenceRequest,
    InferenceResponse,
    ModelMetadata,
    ModelReady,
    Predictions,
    ServerLive,
    ServerMetadata,
    ServerReady,
)
from service.wire import sniff, v2_binary
from service.wire.v2 import v2_metadata

health_router = APIRouter(prefix="/v2/health", tags=["open inference protocol"])
router = APIRouter(tags=["open inference protocol"], route_class=BodyRoute)
compat_router = APIRouter(tags=["mlflow and kserve v1"], route_class=BodyRoute)

SCORING_ERRORS = error_responses(400, 404, 409, 422, 503)
MODEL_ERRORS = error_responses(404, 409, 422, 503)
MLFLOW_EXAMPLE = {"dataframe_split": {"columns": ["a", "b"], "data": [[1, 2], [3, 4]]}}
ForeignBody = Annotated[dict[str, Any], Body(examples=[MLFLOW_EXAMPLE])]
BINARY_DATA = binary_openapi.with_binary_data({}, V2_ANSWER)


def _ref(name: str, version: str | None) -> str:
    return name if version is None else f"{name}:{version}"


@health_router.get("/live", response_model=ServerLive)
def server_live() -> ServerLive:
    """Liveness: 200 whenever the process answers."""
    return ServerLive(live=True)


@health_router.get(
    "/ready",
    response_model=ServerReady,
    responses={503: {"model": ServerReady, "description": "The model store is not usable."}},
)
def server_ready(request: Request) -> JSONResponse:
    """Readiness: 200 when the model store is usable, else 503."""
    store = getattr(request.app.state, "store", None)
    ready = store is not None and store.is_usable()
    body = ServerReady(ready=ready, live=True).model_dump()
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/v2", response_model=ServerMetadata)
def server_metadata() -> ServerMetadata:
    """The server's name, version and protocol extensions (binary tensor data)."""
    return ServerMetadata(name="bsvm", version=__version__, extensions=[v2_binary.EXTENSION])


def _metadata(store: StoreDep, name: str, version: str | None) -> dict[str, Any]:
    found = describe(store, _ref(name, version))
    return v2_metadata(found["record"], found["versions"], found["outputs"])


@router.get("/v2/models/{name}", response_model=ModelMetadata, responses=MODEL_ERRORS)
def model_metadata(name: str, store: StoreDep) -> dict[str, Any]:
    """Inputs (one FP64 `[-1, n_features]` tensor), outputs and versions of a model."""
    return _metadata(store, name, None)


@router.get(
    "/v2/models/{name}/versions/{version}", response_model=ModelMetadata, responses=MODEL_ERRORS
)
def model_version_metadata(name: str, version: str, store: StoreDep) -> dict[str, Any]:
    """Metadata of one version of a model."""
    return _metadata(store, name, version)


@router.get("/v2/models/{name}/ready", response_model=ModelReady, responses=MODEL_ERRORS)
def model_ready(name: str, store: StoreDep) -> ModelReady:
    """Ready when the model is stored and its artifact loads (404 when unknown)."""
    return ModelReady(name=describe(store, name)["record"]["name"], ready=True)


@router.get(
    "/v2/models/{name}/versions/{version}/ready", response_model=ModelReady, responses=MODEL_ERRORS
)
def model_version_ready(name: str, version: str, store: StoreDep) -> ModelReady:
    """Readiness of one version of a model."""
    return ModelReady(name=describe(store, _ref(name, version))["record"]["name"], ready=True)


def infer(name: str, body: InferenceRequest) -> dict[str, Any]:
    """Score V2 input tensors; outputs `label`, `decision`, `probability` (default: all).

    Binary tensor data (KServe's and Triton's extension): send the JSON object, then each
    input's bytes (little-endian, row-major) in the order of `inputs`, each input giving
    `parameters.binary_data_size` instead of `data`, with `Content-Type:
    application/octet-stream` and `Inference-Header-Content-Length` set to the JSON's length.
    Outputs come back as bytes after the response's JSON when asked for (see the 200)."""
    # the signature declares the JSON body; PredictRoute's handler reads and answers every body
    raise NotImplementedError  # pragma: no cover


def infer_version(name: str, version: str, body: InferenceRequest) -> dict[str, Any]:
    """Score V2 input tensors with one version of a model (binary tensor data as for
    `/v2/models/{name}/infer`)."""
    raise NotImplementedError  # pragma: no cover


for _path, _endpoint in (
    ("/v2/models/{name}/infer", infer),
    ("/v2/models/{name}/versions/{version}/infer", infer_version),
):
    router.add_api_route(
        _path,
        _endpoint,
        methods=["POST"],
        response_model=InferenceResponse,
        response_model_exclude_none=True,
        responses=SCORING_ERRORS,
        openapi_extra=BINARY_DATA,
        route_class_override=PredictRoute,
    )


def _format(body: dict[str, Any], allowed: tuple[str, ...]) -> str:
    """The body's format when it is one of ``allowed`` (422 naming the body otherwise)."""
    fmt = sniff.body_format(body)
    if fmt not in allowed:
        raise InvalidInput(
            "unsupported body format", [detail("body", f"send exactly one of {list(allowed)}")]
        )
    return fmt


@compat_router.post("/invocations", response_model=Predictions, responses=SCORING_ERRORS)
async def invocations(
    body: ForeignBody,
    request: Request,
    model: Annotated[
        str, Query(description="Model reference (id, name, name@alias, name:version).")
    ],
) -> Response:
    """MLflow scoring server's route: `dataframe_split`, `dataframe_records`, `instances`,
    `inputs` bodies; answers `{"predictions": [label, ...]}`."""
    call = Call(request.scope, b"")
    return await foreign(call, _format(body, sniff.MLFLOW_KEYS), body, model)


@compat_router.post(
    "/v1/models/{name}:predict", response_model=Predictions, responses=SCORING_ERRORS
)
async def v1_predict(
    name: str,
    request: Request,
    body: Annotated[dict[str, Any], Body(examples=[{"instances": IRIS_ROWS}])],
) -> Response:
    """KServe V1 predict: `{"instances": [[...], ...]}` → `{"predictions": [label, ...]}`."""
    call = Call(request.scope, b"")
    return await foreign(call, _format(body, ("instances", "inputs")), body, name, "name")
