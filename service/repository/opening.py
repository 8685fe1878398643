"""Open the repository at start: migrate the database, sweep debris.

An old model folder is imported only when an operator runs ``bsvm-import-legacy``
(``service.repository.legacy``), never at start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from service.errors import StoreUnavailable
from service.repository.database import Database
from service.repository.store import ModelStore
from service.settings import Settings

logger = logging.getLogger("service.repository")

#: The first wait between two attempts at start, doubled after each up to ``MAX_DELAY_S``.
FIRST_DELAY_S = 0.25
MAX_DELAY_S = 5.0


class StartupFailed(Exception):
    """The repository could not be opened at start within ``BSVM_STARTUP_TIMEOUT_S``; the
    message is one line naming the cause."""


def open_store(settings: Settings) -> ModelStore:
    """A ready ``ModelStore``: schema at head, crash debris swept."""
    db = Database(settings.registry_url)
    db.migrate()
    store = ModelStore(settings, db)
    try:
        if not store.artifacts.warm_up():
            raise StoreUnavailable("the artifact store is not answering")
        removed = store.sweep(settings.sweep_grace_s)
    except (
        StoreUnavailable
    ):  # housekeeping: the next start sweeps; readiness says the store is down
        logger.warning("the artifact store is not answering: crash debris not swept this start")
        return store
    if removed:
        logger.warning("removed %d leftovers of interrupted saves: %s", len(removed), removed[:5])
    return store


def open_store_within(
    settings: Settings,
    timeout_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ModelStore:
    """``open_store``, retried with backoff for ``timeout_s`` (a database still starting, a
    volume still being mounted); then ``StartupFailed`` naming the last cause."""
    start = clock()
    delay = FIRST_DELAY_S
    attempts = 0
    while True:
        attempts += 1
        try:
            return open_store(settings)
        except Exception as exc:
            waited = clock() - start
            if waited + delay > timeout_s:
                raise StartupFailed(
                    f"cannot start: {startup_cause(settings, exc)} "
                    f"(gave up after {attempts} attempts in {waited:.1f} s, "
                    f"BSVM_STARTUP_TIMEOUT_S={timeout_s:g})"
                ) from exc
        sleep(delay)
        delay = min(delay * 2, MAX_DELAY_S)


def startup_cause(settings: Settings, exc: BaseException) -> str:
    """What kept the repository from opening, in one line: the data folder, the database (its
    URL without credentials) or the artifact store, with the error."""
    if isinstance(exc, sa_exc.DBAPIError | sa_exc.OperationalError):
        url = make_url(settings.registry_url)
        where = url.database if url.get_backend_name() == "sqlite" else url.render_as_string()
        detail = exc.orig if getattr(exc, "orig", None) is not None else exc
        return f"the database {where} is not usable: {one_line(detail)}"
    if isinstance(exc, OSError):
        return f"the data folder {settings.data_dir.resolve()} is not usable: {one_line(exc)}"
    return (
        f"the model repository ({make_url(settings.registry_url).render_as_string()}, "
        f"{settings.artifacts_url}) is not usable: {one_line(exc)}"
    )


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (drivers' messages run over several)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
