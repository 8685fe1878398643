"""Which back end a failure came from, when it is one that passes (down, unreachable, cut off).

A training that fitted its model and then could not store it retries the save when the failure is
transient (``backend_down`` names the back end), and gives up at once on anything else (a
conflict, a refused artifact, a bug). Transient: the database's connection errors (SQLAlchemy's
``OperationalError``, ``InterfaceError``, a pool timeout, a connection invalidated), and the
store's network and I/O errors (``OSError`` but not a missing file, an existing one or a refused
permission, ``TimeoutError``, botocore's connection and timeout errors, an S3 5xx or throttling).
"""

from __future__ import annotations

from sqlalchemy import exc as sa_exc

DATABASE = "database"
STORE = "store"
_NOT_TRANSIENT_OS = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError)
_S3_TRANSIENT_CODES = {
    "InternalError",
    "ServiceUnavailable",
    "SlowDown",
    "RequestTimeout",
    "Throttling",
    "ThrottlingException",
}


def _botocore_transient(exc: BaseException) -> bool:
    try:
        from botocore import exceptions as boto
    except ImportError:  # no s3 extra: no botocore errors either
        return False
    if isinstance(exc, boto.ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return error.get("Code") in _S3_TRANSIENT_CODES or int(status) >= 500
    return isinstance(
        exc,
        boto.EndpointConnectionError
        | boto.ConnectionClosedError
        | boto.ConnectTimeoutError
        | boto.ReadTimeoutError
        | boto.HTTPClientError,
    )


def backend_down(exc: BaseException) -> str | None:
    """``"database"`` or ``"store"`` when ``exc`` (or what it was raised from) says that back end
    is unreachable for now; None when retrying would not help."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return DATABASE
        if isinstance(
            current,
            sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.TimeoutError,
        ):
            return DATABASE
        if isinstance(current, sa_exc.SQLAlchemyError):
            return None
        if isinstance(current, _NOT_TRANSIENT_OS):
            return None
        if isinstance(current, OSError | TimeoutError | ConnectionError):
            return STORE
        if _botocore_transient(current):
            return STORE
        current = current.__cause__ or current.__context__
    return None
