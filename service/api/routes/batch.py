"""``POST /batch-predictions``: score files by reference into files, as a background job."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse

from service.api.content_types import BodyRoute
from service.api.deps import JobsDep, SettingsDep, StoreDep
from service.api.openapi import error_responses
from service.inference.batch_scoring import KIND, plan_batch
from service.schemas.batch import BatchPredictRequest
from service.schemas.jobs import JobView

router = APIRouter(tags=["batch"], route_class=BodyRoute)

EXAMPLE = {
    "model": "iris-demo@stable",
    "input": {"uri": "s3://bucket/score/*.parquet", "format": "parquet"},
    "output": {"uri": "s3://bucket/out/run-1/", "format": "parquet"},
    "outputs": ["predictions", "probabilities"],
    "keep_columns": ["id"],
}
ACCEPTED = {
    "model": JobView,
    "description": "Scoring started in the background; poll the job at Location (its `result` "
    "names the output files once done).",
    "headers": {"Location": {"description": "/jobs/{job_id}", "schema": {"type": "string"}}},
}


@router.post(
    "/batch-predictions",
    status_code=202,
    response_model=JobView,
    responses={202: ACCEPTED, **error_responses(404, 409, 422, 429, 503)},
)
def batch_predictions(
    body: Annotated[
        BatchPredictRequest,
        Body(openapi_examples={"parquet on S3": {"summary": "Parquet files", "value": EXAMPLE}}),
    ],
    settings: SettingsDep,
    store: StoreDep,
    jobs: JobsDep,
) -> Any:
    """Score input files (Parquet, CSV) with a stored model into one output file per input file."""
    plan = plan_batch(body, store, settings)
    job = jobs.submit_job(
        KIND, plan.model_type, plan.name, plan.to_bytes(), plan.model_id, target=plan.output_url
    )
    return JSONResponse(
        JobView(**job).model_dump(), status_code=202, headers={"Location": f"/jobs/{job['job_id']}"}
    )
