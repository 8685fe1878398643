"""Back-end outages: one ``Outage`` per back end (the database, the artifact store).

Whoever talks to a back end reports each call: ``answered()`` after a success (one attribute read
when nothing changed), ``failed(exc)`` with the exception that made it raise a
``BackendUnavailable``. The outage is logged once when it starts and once when the back end
answers again, with its length, so a 20-second outage under traffic is two log lines, not one
traceback per request; each request it failed still has its own access line (``backend``).

``BoundedCheck`` runs a readiness check of one back end in a thread of its own and waits for it at
most ``CHECK_TIMEOUT_S``, so a hanging back end makes the probe answer 503 in time instead of
never; a check still hanging is waited for again by the next probe, never started twice.

Which back end a failure came from, when it is one that passes (down, unreachable, cut off).

A training that fitted its model and then could not store it retries the save when the failure is
transient (``backend_down`` names the back end), and gives up at once on anything else (a
conflict, a refused artifact, a bug). Transient: the database's connection errors (SQLAlchemy's
``OperationalError``, ``InterfaceError``, a pool timeout, a connection invalidated), and the
store's network and I/O errors (``OSError`` but not a missing file, an existing one or a refused
permission, ``TimeoutError``, botocore's connection and timeout errors, an S3 5xx or throttling).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from sqlalchemy import exc as sa_exc

from service.errors import DatabaseUnavailable, StoreUnavailable

logger = logging.getLogger("service.repository.faults")

CHECK_TIMEOUT_S = 2.0
"""The longest a readiness probe waits on one back end."""


def summary(exc: BaseException) -> str:
    """The first line of ``exc``'s text, with its type: enough to tell refused from timed out."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


class Outage:
    """Whether ``backend`` answered its last call, and since when it has not."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.down_since: float | None = None
        self._lock = threading.Lock()

    @property
    def is_down(self) -> bool:
        """True from a failed call until the next call that succeeds."""
        return self.down_since is not None

    def failed(self, exc: BaseException) -> None:
        """A call failed on ``exc``; log the start of an outage (once)."""
        if self.down_since is not None:
            return
        with self._lock:
            if self.down_since is not None:
                return
            self.down_since = time.monotonic()
        logger.warning(
            "%s unavailable: %s",
            self.backend,
            summary(exc),
            extra={"fields": {"backend": self.backend}},
        )

    def answered(self) -> None:
        """A call succeeded; log the end of an outage (once), with its length."""
        if self.down_since is None:
            return
        with self._lock:
            since, self.down_since = self.down_since, None
        if since is not None:
            seconds = round(time.monotonic() - since, 3)
            logger.warning(
                "%s answers again after %.1f s",
                self.backend,
                seconds,
                extra={"fields": {"backend": self.backend, "outage_s": seconds}},
            )


class BoundedCheck:
    """``check(timeout_s) -> bool`` of one back end, in a daemon thread, waited for in bounds."""

    def __init__(self, name: str, check: Callable[[float], bool]) -> None:
        self.name = name
        self.check = check
        self._running: Future[bool] | None = None
        self._lock = threading.Lock()

    def start(self, timeout_s: float) -> Future[bool]:
        """The running check, or a new one when none runs (its answer a ``Future``)."""
        with self._lock:
            if self._running is None or self._running.done():
                future: Future[bool] = Future()
                thread = threading.Thread(
                    target=self._run,
                    args=(future, timeout_s),
                    daemon=True,  # a hung check never holds the process at exit
                    name=f"bsvm-check-{self.name}",
                )
                self._running = future
                thread.start()
            return self._running

    def _run(self, future: Future[bool], timeout_s: float) -> None:
        try:
            future.set_result(bool(self.check(timeout_s)))
        except Exception as exc:  # a check that raises says "not usable", never a crash
            logger.warning("%s check failed: %s", self.name, summary(exc))
            future.set_result(False)


def run_checks(
    checks: dict[str, BoundedCheck], timeout_s: float = CHECK_TIMEOUT_S
) -> dict[str, bool]:
    """Every check at once; each answer within ``timeout_s`` of the start, False when late."""
    deadline = time.monotonic() + timeout_s
    futures = {name: check.start(timeout_s) for name, check in checks.items()}
    answers = {}
    for name, future in futures.items():
        try:
            answers[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            logger.warning("%s check did not answer within %g s", name, timeout_s)
            answers[name] = False
    return answers


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
        if isinstance(current, DatabaseUnavailable):
            return DATABASE
        if isinstance(current, StoreUnavailable):
            return STORE
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
