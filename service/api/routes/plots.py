"""A model's plots (OpenAPI tag ``evaluation``): ROC curves of its folds, decision regions, the
EM/ECME path over ν (also as JSON), and the comparison with a linear SVM. Models by id, ``name``,
``name:version`` or ``name@alias``."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from service.api.deps import SettingsDep, StoreDep
from service.api.openapi import error_responses
from service.api.params import Level, ModelRef, Scale
from service.plots.boundary import boundary_png
from service.plots.canvas import being_computed
from service.plots.compare import compare_png
from service.plots.paths import path_png, path_view
from service.plots.roc import roc_png
from service.repository.store import ModelStore
from service.schemas.paths import RegularisationPath
from service.schemas.predict import DEFAULT_LEVEL

router = APIRouter(prefix="/models", tags=["evaluation"])

Feature = Annotated[
    str | None,
    Query(min_length=1, max_length=256, description="Feature name or 0-based index."),
]
ERRORS = error_responses(404, 409, 422, 503)


def png_response(description: str) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI 200 of a PNG route, plus its errors."""
    return {
        200: {
            "description": description,
            "content": {"image/png": {"schema": {"type": "string", "format": "binary"}}},
        },
        **ERRORS,
    }


def _record(store: ModelStore, ref: str, request: Request) -> dict[str, Any]:
    """The record of the model ``ref`` names (404 when unknown)."""
    model_id = store.resolve(ref)
    request.state.model_id = model_id
    return store.get_record(model_id)


async def _ready_record(
    store: ModelStore, ref: str, request: Request, key: str, wait_s: float
) -> dict[str, Any]:
    """The record of ``ref`` once its ``key`` plot data is computed (the ν path and the
    comparison come after the training's answer), waiting up to ``wait_s`` without a thread."""
    record = await run_in_threadpool(_record, store, ref, request)
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while being_computed(record, key) and (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(delay, left))
        delay = min(2 * delay, 0.5)
        record = await run_in_threadpool(store.get_record, record["model_id"])
    return record


def _png(content: bytes) -> Response:
    return Response(content=content, media_type="image/png")


@router.get(
    "/{ref}/roc.png",
    response_class=Response,
    responses=png_response("PNG: each fold's ROC curve, their mean, AUCs in the legend."),
)
def get_roc_plot(ref: ModelRef, store: StoreDep, request: Request) -> Response:
    """ROC curves of the cross-validation folds (409 when trained without `evaluation.cv`).

    Binary: of `classes[1]` from decision values. Multiclass: the macro one-vs-rest curve.
    """
    return _png(roc_png(_record(store, ref, request)))


@router.get(
    "/{ref}/boundary.png",
    response_class=Response,
    responses=png_response("PNG: decision regions on two features."),
)
def get_boundary_plot(
    ref: ModelRef, store: StoreDep, request: Request, x: Feature = None, y: Feature = None
) -> Response:
    """Decision regions on features `x` and `y` (default the first two), others at their means.

    Binary SVMs add the boundary and the margins (decision ±1); LDA, QDA and multiclass models
    the boundaries between classes; kernel SVMs on two features circle their support vectors.
    """
    record = _record(store, ref, request)
    return _png(boundary_png(record, store.load(record["model_id"]), x, y))


@router.get(
    "/{ref}/path",
    response_model=RegularisationPath,
    responses=ERRORS,
)
async def get_path(ref: ModelRef, store: StoreDep, settings: SettingsDep, request: Request) -> Any:
    """EM modes over 30 values of ν (±3 decades around the fitted ν); em_svm and ecme_svm only.

    Computed after the training answers: waits up to `BSVM_PLOT_WAIT_S` for it, then 409 with
    `Retry-After`.
    """
    return path_view(await _ready_record(store, ref, request, "path", settings.plot_wait_s))


@router.get(
    "/{ref}/path.png",
    response_class=Response,
    responses=png_response("PNG: ‖β‖ and every coefficient against log10 ν."),
)
async def get_path_plot(
    ref: ModelRef,
    store: StoreDep,
    settings: SettingsDep,
    request: Request,
    scale: Scale = "standardised",
) -> Response:
    """The path over ν as a plot (em_svm and ecme_svm only; 409 for other models).

    Waits for the path like `GET /models/{ref}/path`.
    """
    record = await _ready_record(store, ref, request, "path", settings.plot_wait_s)
    return _png(await run_in_threadpool(path_png, record, scale))


@router.get(
    "/{ref}/compare.png",
    response_class=Response,
    responses=png_response("PNG: Bayesian against linear-SVM coefficients, with y = x."),
)
async def get_compare_plot(
    ref: ModelRef,
    store: StoreDep,
    settings: SettingsDep,
    request: Request,
    scale: Scale = "original",
    level: Level = DEFAULT_LEVEL,
) -> Response:
    """A Bayesian model's coefficients against a linear SVM's fitted on the same data at C = ν².

    α = 2 makes them equal (the mode is the SVM's solution); for other α the same C = ν² is
    used, so the plot shows what the prior's exponent changes. Models with draws add credible
    intervals as error bars. 409 for non-Bayesian models. For em_svm and ecme_svm it is computed
    with the ν path, after the training answers, and waited for like it.
    """
    record = await _ready_record(store, ref, request, "compare", settings.plot_wait_s)

    def draw() -> bytes:
        return compare_png(record, store.load(record["model_id"]), scale, level)

    return _png(await run_in_threadpool(draw))
