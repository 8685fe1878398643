"""``/jobs/{job_id}``: status and progress of a background training; cancel it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from service.api.deps import JobsDep
from service.api.openapi import error_responses
from service.api.schemas.jobs import JobView
from service.training.jobs import JOB_ID_PATTERN

router = APIRouter(prefix="/jobs", tags=["jobs"])

JobId = Annotated[str, Path(pattern=JOB_ID_PATTERN, max_length=34, description="Job id.")]


@router.get("/{job_id}", response_model=JobView, responses=error_responses(404, 422, 503))
def get_job(job_id: JobId, jobs: JobsDep) -> Any:
    """Status, progress 0..1, the model id when done, the error when failed."""
    return jobs.get(job_id).view()


@router.delete("/{job_id}", response_model=JobView, responses=error_responses(404, 422, 503))
def cancel_job(job_id: JobId, jobs: JobsDep) -> Any:
    """Cancel a queued or running job (its worker is killed); a finished job is unchanged."""
    return jobs.cancel(job_id).view()
