"""``POST /train``: fit one model in a worker process; 201 with its record, or 202 with a job."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Request
from fastapi.responses import JSONResponse

from service.api.csv_route import CsvRoute, csv_openapi
from service.api.deps import JobsDep, ModelTypesDep, SettingsDep, StoreDep
from service.api.examples import IRIS_CSV, train_examples
from service.api.openapi import error_responses
from service.model_types import model_types
from service.schemas.jobs import JobView
from service.schemas.models import ModelRecord
from service.schemas.train import TrainRequest
from service.training.tasks import prepare_task
from service.wire.csv_bodies import TRAIN_QUERY

router = APIRouter(tags=["train"], route_class=CsvRoute)

CSV_BODY = (
    "CSV with a header row: the `target` column holds the labels, every other column is a "
    "feature named by its header. The query names the model type and the target, e.g. "
    "`?model_type=lda&target=species&name=iris-demo` for the example."
)
ACCEPTED = {
    "model": JobView,
    "description": "Training started in the background; poll the job at Location.",
    "headers": {"Location": {"description": "/jobs/{job_id}", "schema": {"type": "string"}}},
}


def wants_async(body: Any, prefer: str | None) -> bool:
    """``"background": true`` or ``Prefer: respond-async``."""
    return bool(body.background) or "respond-async" in (prefer or "").lower()


@router.post(
    "/train",
    status_code=201,
    response_model=ModelRecord,
    responses={202: ACCEPTED, **error_responses(400, 409, 422, 429, 503)},
    openapi_extra=csv_openapi(
        CSV_BODY,
        TRAIN_QUERY,
        example=IRIS_CSV,
    ),
)
def train(
    body: Annotated[
        TrainRequest,
        Body(discriminator="model_type", openapi_examples=train_examples(model_types())),
    ],
    request: Request,
    settings: SettingsDep,
    types: ModelTypesDep,
    jobs: JobsDep,
    store: StoreDep,
    prefer: Annotated[str | None, Header(description="`respond-async` = background")] = None,
) -> Any:
    """Train one model on posted rows (JSON or CSV); its record, or a job when in background."""
    task = prepare_task(body, settings, types)
    if not body.replace_schema:  # the same check runs again when the model is stored
        store.registry.check_schema(
            task.meta["name"],
            task.model_type,
            {"n_features": task.n_features, "feature_names": task.meta["feature_names"]},
        )
    background = wants_async(body, prefer) or task.data is not None  # by reference: a job
    task.meta["background"] = background  # a failed save is retried long only when acknowledged
    job = jobs.submit(task)
    if background:
        return JSONResponse(
            JobView(**job).model_dump(),
            status_code=202,
            headers={"Location": f"/jobs/{job['job_id']}"},
        )
    record = jobs.wait(job["job_id"])
    request.state.model_id = record["model_id"]
    return record
