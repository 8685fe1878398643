"""``/jobs``: list background trainings, read one's status and progress, cancel it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from service.api.deps import JobsDep
from service.api.openapi import error_responses
from service.repository.jobs import JOB_ID_PATTERN
from service.schemas.jobs import JobList, JobStatus, JobView
from service.schemas.names import NAME_PATTERN

router = APIRouter(prefix="/jobs", tags=["jobs"])

JobId = Annotated[str, Path(pattern=JOB_ID_PATTERN, max_length=34, description="Job id.")]


@router.get("", response_model=JobList, responses=error_responses(422, 503))
def list_jobs(
    jobs: JobsDep,
    status: Annotated[JobStatus | None, Query(description="Only jobs in this state.")] = None,
    name: Annotated[
        str | None, Query(pattern=NAME_PATTERN, max_length=64, description="Model name.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> Any:
    """Jobs of every process, newest first; filter by status and model name."""
    items, total = jobs.list(status=status, name=name, limit=limit, offset=offset)
    return {"items": items, "total": total, "limit": limit, "offset": offset}


@router.get("/{job_id}", response_model=JobView, responses=error_responses(404, 422, 503))
def get_job(job_id: JobId, jobs: JobsDep) -> Any:
    """Status, progress 0..1, the model id and version when done, the error when failed."""
    return jobs.get(job_id)


@router.delete("/{job_id}", response_model=JobView, responses=error_responses(404, 422, 503))
def cancel_job(job_id: JobId, jobs: JobsDep) -> Any:
    """Cancel a queued or running job (its worker is killed); a finished job is unchanged."""
    return jobs.cancel(job_id)
