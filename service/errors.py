"""The service's errors and the one envelope every error response uses.

Hierarchy::

    ApiError                     status, stable code, message for a person, field details
     ├── BadRequest              400 BAD_REQUEST (unparseable body)
     ├── Unauthorized            401 UNAUTHORIZED
     ├── NotFound                404 NOT_FOUND
     │    └── ArtifactMissing    404 ARTIFACT_MISSING (a model's row is there, its artifact is not)
     ├── RequestTimeout          408 REQUEST_TIMEOUT (the body stopped arriving)
     ├── Conflict                409 CONFLICT (the model cannot do that)
     │    ├── TrainingCancelled  409 TRAINING_CANCELLED
     │    ├── NameSchemaConflict 409 NAME_SCHEMA_CONFLICT (a name keeps one type and feature set)
     │    └── ArtifactRefused    409 ARTIFACT_REFUSED (signature check failed; never unpickled)
     ├── PayloadTooLarge         413 PAYLOAD_TOO_LARGE
     ├── UnsupportedMediaType    415 UNSUPPORTED_MEDIA_TYPE (a body neither JSON nor CSV)
     ├── InvalidInput            422 INVALID_INPUT (fields or data)
     │    ├── TrainingTimeout    422 TRAINING_TIMEOUT
     │    └── TrainingOutOfMemory 422 TRAINING_OUT_OF_MEMORY (over BSVM_WORKER_MEMORY_MB)
     ├── Busy                    429 BUSY (+ Retry-After)
     ├── Unavailable             503 UNAVAILABLE (+ Retry-After)
     │    └── BackendUnavailable (+ Retry-After; ``backend`` names it)
     │         ├── DatabaseUnavailable 503 DATABASE_UNAVAILABLE (the registry database)
     │         └── StoreUnavailable    503 STORE_UNAVAILABLE (the artifact store)
     ├── TrainingFailed          500 TRAINING_FAILED (worker crashed; details in the log)
     └── TrainingAbandoned       500 TRAINING_ABANDONED (its server stopped twice while running it)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from pydantic import BaseModel, Field


class ErrorDetail(BaseModel):
    """One problem with one field."""

    field: str = Field(description="Dotted path of the offending field, e.g. 'params.C' or 'X[3]'.")
    problem: str = Field(description="What is wrong with it.")


class ErrorBody(BaseModel):
    """The envelope of every error response."""

    error: str = Field(description="Message for a person.")
    code: str = Field(description="Stable machine-readable code.")
    details: list[ErrorDetail] = Field(default_factory=list)
    request_id: str = Field(description="Also sent as the X-Request-ID header.")


class ApiError(Exception):
    """An error that maps to one HTTP status and the envelope."""

    status_code = 500
    code = "INTERNAL"

    def __init__(
        self,
        message: str,
        details: list[ErrorDetail] | None = None,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []
        if code is not None:
            self.code = code
        self.headers = headers or {}


class BadRequest(ApiError):
    status_code, code = 400, "BAD_REQUEST"


class Unauthorized(ApiError):
    status_code, code = 401, "UNAUTHORIZED"


class NotFound(ApiError):
    status_code, code = 404, "NOT_FOUND"


class RequestTimeout(ApiError):
    status_code, code = 408, "REQUEST_TIMEOUT"


class Conflict(ApiError):
    status_code, code = 409, "CONFLICT"


class PayloadTooLarge(ApiError):
    status_code, code = 413, "PAYLOAD_TOO_LARGE"


class UnsupportedMediaType(ApiError):
    status_code, code = 415, "UNSUPPORTED_MEDIA_TYPE"


class InvalidInput(ApiError):
    status_code, code = 422, "INVALID_INPUT"


class Busy(ApiError):
    status_code, code = 429, "BUSY"


class Unavailable(ApiError):
    status_code, code = 503, "UNAVAILABLE"


BACKEND_RETRY_AFTER_S = 5
"""The ``Retry-After`` of a 503 for a back end that is down or does not answer."""


class BackendUnavailable(Unavailable):
    """A back end (``backend``) is down or did not answer in time; the request may be retried."""

    backend = "backend"

    def __init__(self, message: str, details: list[ErrorDetail] | None = None) -> None:
        super().__init__(message, details, headers={"Retry-After": str(BACKEND_RETRY_AFTER_S)})


class DatabaseUnavailable(BackendUnavailable):
    """The registry database refused, dropped or timed out a connection."""

    code, backend = "DATABASE_UNAVAILABLE", "database"


class StoreUnavailable(BackendUnavailable):
    """The artifact store (folder or S3) failed or did not answer within ``BSVM_STORE_TIMEOUT_S``."""

    code, backend = "STORE_UNAVAILABLE", "store"


class TrainingTimeout(InvalidInput):
    """The fit ran longer than ``train_timeout_s`` (a batch scoring ``batch_timeout_s``) and was
    stopped."""

    code = "TRAINING_TIMEOUT"


class TrainingFailed(ApiError):
    """The worker crashed or the estimator raised something other than a ValueError."""

    code = "TRAINING_FAILED"


class TrainingCancelled(Conflict):
    """The job was cancelled (``DELETE /jobs/{id}``) before it finished."""

    code = "TRAINING_CANCELLED"


class ArtifactMissing(NotFound):
    """A model's row exists but its artifact is not in the artifact store (deleted or lost)."""

    code = "ARTIFACT_MISSING"


class ArtifactRefused(Conflict):
    """A stored artifact failed its integrity check and was not loaded."""

    code = "ARTIFACT_REFUSED"


class TrainingOutOfMemory(InvalidInput):
    """The fit needed more memory than ``BSVM_WORKER_MEMORY_MB``; its worker was stopped."""

    code = "TRAINING_OUT_OF_MEMORY"


class TrainingAbandoned(ApiError):
    """The process running the job stopped (its lease expired) too many times."""

    status_code, code = 500, "TRAINING_ABANDONED"


class NameSchemaConflict(Conflict):
    """A name's models keep one model type and one feature set unless the request says so."""

    code = "NAME_SCHEMA_CONFLICT"


def detail(field: str, problem: str) -> ErrorDetail:
    """Shorthand for one ``ErrorDetail``."""
    return ErrorDetail(field=field, problem=problem)


def unknown_name(name: str, allowed: Iterable[str], hint: str | None = None) -> str:
    """The problem of an unknown key or parameter: the hint if any, else the closest allowed name
    (case aside) and every allowed one."""
    if hint:
        return hint
    allowed = sorted(allowed)
    by_lower = {a.lower(): a for a in allowed}
    close = difflib.get_close_matches(name.lower()[:64], list(by_lower), n=1, cutoff=0.6)
    guess = f"did you mean {by_lower[close[0]]!r}? " if close else ""
    return f"unknown; {guess}allowed: {', '.join(allowed) or 'none'}"
