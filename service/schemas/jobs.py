"""Bodies of the job routes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.errors import ErrorDetail

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class JobError(BaseModel):
    """Why a job failed: the code and message a synchronous request would have answered."""

    code: str
    message: str
    details: list[ErrorDetail] = Field(default_factory=list)


class JobView(BaseModel):
    """A background training."""

    model_config = ConfigDict(protected_namespaces=())

    job_id: str
    status: JobStatus
    progress: float = Field(ge=0.0, le=1.0)
    model_type: str
    name: str
    model_id: str | None = Field(None, description="Set when the job succeeded.")
    version: int | None = Field(
        None, description="The stored model's version of its name, set with model_id."
    )
    error: JobError | None = Field(None, description="Set when the job failed.")
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None


class JobList(BaseModel):
    """One page of jobs, newest first."""

    items: list[JobView]
    total: int = Field(description="Jobs matching the filter, over all pages.")
    limit: int
    offset: int
