"""The service's errors and the one envelope every error response uses.

Hierarchy::

    ApiError                     status, stable code, message for a person, field details
     ├── BadRequest              400 BAD_REQUEST (unparseable body)
     ├── Unauthorized            401 UNAUTHORIZED
     ├── NotFound                404 NOT_FOUND
     ├── Conflict                409 CONFLICT (the model cannot do that)
     ├── PayloadTooLarge         413 PAYLOAD_TOO_LARGE
     ├── InvalidInput            422 INVALID_INPUT (fields or data)
     ├── Busy                    429 BUSY (+ Retry-After)
     └── Unavailable             503 UNAVAILABLE (+ Retry-After)
"""

from __future__ import annotations

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


class Conflict(ApiError):
    status_code, code = 409, "CONFLICT"


class PayloadTooLarge(ApiError):
    status_code, code = 413, "PAYLOAD_TOO_LARGE"


class InvalidInput(ApiError):
    status_code, code = 422, "INVALID_INPUT"


class Busy(ApiError):
    status_code, code = 429, "BUSY"


class Unavailable(ApiError):
    status_code, code = 503, "UNAVAILABLE"


def detail(field: str, problem: str) -> ErrorDetail:
    """Shorthand for one ``ErrorDetail``."""
    return ErrorDetail(field=field, problem=problem)
