"""Bodies of the job routes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.errors import ErrorDetail
from service.schemas.batch import BatchResult

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JobKind = Literal["train", "batch_predict"]


class JobError(BaseModel):
    """Why a job failed: the code and message a synchronous request would have answered."""

    code: str
    message: str
    details: list[ErrorDetail] = Field(default_factory=list)


class ProgressDetail(BaseModel):
    """What a running job is doing: the passes over its data and the partitions of this pass."""

    model_config = ConfigDict(populate_by_name=True)

    stage: Literal["reading", "scaling", "fitting", "evaluating", "scoring"] | None = Field(
        None,
        description="A training by reference: `reading` (the first pass), `scaling` (the two "
        "passes of `preprocess: standard`), `fitting`, `evaluating` (metrics and plot data); "
        "a batch scoring: `scoring`.",
    )
    pass_: int | None = Field(
        None,
        alias="pass",
        ge=0,
        description="Passes over the partitions begun so far, every stage counted.",
    )
    partitions_done: int = Field(ge=0, description="Partitions done in this pass.")
    partitions: int = Field(ge=0, description="Partitions in one pass (files or row groups).")
    iterations: int | None = Field(
        None,
        ge=0,
        description="Passes the fitting stage completed: one per iteration of the solvers by "
        "partitions (an EM/ECME iteration, a Gibbs sweep of one chain and class, a Newton "
        "step); null outside a training by reference.",
    )


class JobView(BaseModel):
    """A background training or batch scoring."""

    model_config = ConfigDict(protected_namespaces=())

    job_id: str
    kind: JobKind = Field(
        "train", description="`train` (a model) or `batch_predict` (files scored into files)."
    )
    status: JobStatus
    progress: float = Field(
        ge=0.0, le=1.0, description="0..1; a batch scoring's share of input files written."
    )
    progress_detail: ProgressDetail | None = Field(
        None,
        description="Set while a training by reference or a batch scoring runs, and kept at "
        "its end: passes, partitions and iterations.",
    )
    model_type: str
    name: str = Field(description="The model's name (a batch scoring: of the model it uses).")
    model_id: str | None = Field(
        None, description="Set when a training succeeded; a batch scoring's model from the start."
    )
    version: int | None = Field(
        None, description="The stored model's version of its name, set with model_id."
    )
    error: JobError | None = Field(None, description="Set when the job failed.")
    result: BatchResult | None = Field(
        None, description="Set when a batch scoring succeeded: its output URI, files and rows."
    )
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None


class JobList(BaseModel):
    """One page of jobs, newest first."""

    items: list[JobView]
    total: int = Field(description="Jobs matching the filter, over all pages.")
    limit: int
    offset: int
