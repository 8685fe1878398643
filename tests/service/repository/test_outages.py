"""Back ends that are down or hang, on the real components: PostgreSQL stopped with
``pg_ctl stop -m immediate`` and moto's S3 server behind a proxy that refuses or hangs. Every
fault is ``DatabaseUnavailable`` or ``StoreUnavailable`` (503 with ``Retry-After``), never the
driver's error; reads of a loaded model go on from memory within ``stale_if_error_s``."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from service.errors import DatabaseUnavailable, StoreUnavailable
from service.repository.artifacts import ArtifactStore
from service.repository.database import Database
from service.repository.faults import BoundedCheck, run_checks
from service.repository.registry import ModelRegistry
from tests.service.conftest import BUCKET
from tests.service.postgres_server import PostgresServer, fresh_database
from tests.service.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

BOUND_S = 30.0
"""Any call of these tests that does not return within this never would (no timing assertion)."""
FAULT_TIMEOUT_S = 0.5
"""The store's timeout while it refuses or hangs (each call waits it out: botocore and s3fs retry
refused connections until it ends); 1.5 s otherwise, so that no call of a loaded machine times
out."""


def bounded(call, *args, **kwargs):
    """``call(*args, **kwargs)`` in a thread, waited for at most ``BOUND_S``."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call, *args, **kwargs).result(timeout=BOUND_S)


def recovered(call, *args):
    """``call(*args)`` once the back end answers again: a call still timing out on a connection
    opened during the fault (a loaded machine) is tried again, within ``BOUND_S``."""
    deadline = time.monotonic() + BOUND_S
    while True:
        try:
            return bounded(call, *args)
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture()
def database(stoppable_postgres: PostgresServer) -> Iterator[Database]:
    db = Database(fresh_database(stoppable_postgres.url))
    db.migrate()
    yield db
    db.dispose()


@pytest.fixture()
def stopped(stoppable_postgres: PostgresServer) -> Iterator[PostgresServer]:
    """Call ``stopped.stop()`` in the test; the server is started again at teardown whatever
    happened."""
    yield stoppable_postgres
    stoppable_postgres.stop(check=False)
    stoppable_postgres.start()


def record(name: str) -> dict:
    return {"name": name, "model_type": "lda", "n_features": 2, "feature_names": None}


def resolved_once(database: Database, stale_if_error_s: float) -> tuple[ModelRegistry, str]:
    """A registry whose model ``iris`` has been resolved once; the registry and the model id."""
    registry = ModelRegistry(database, resolve_cache_s=0.01, stale_if_error_s=stale_if_error_s)
    model_id = f"m_{uuid.uuid4().hex}"
    registry.add(model_id, record("iris"), 10)
    assert registry.resolve("iris") == model_id
    return registry, model_id


def test_a_stopped_database_is_unavailable_until_it_is_back(database, stopped):
    assert database.is_usable()
    stopped.stop("immediate")
    with pytest.raises(DatabaseUnavailable) as caught, database.read():
        pass
    assert caught.value.status_code == 503 and caught.value.code == "DATABASE_UNAVAILABLE"
    assert int(caught.value.headers["Retry-After"]) > 0
    with pytest.raises(DatabaseUnavailable), database.write():
        pass
    assert database.outage.is_down and not database.is_usable()
    stopped.start()
    assert database.is_usable()  # the pool's dead connections are pinged and replaced
    assert not database.outage.is_down


def test_the_last_answer_is_used_within_stale_if_error(database, stopped):
    fresh = ModelRegistry(database, resolve_cache_s=0.01, stale_if_error_s=300)
    strict = ModelRegistry(database, resolve_cache_s=0.01, stale_if_error_s=0)
    model_id = f"m_{uuid.uuid4().hex}"
    fresh.add(model_id, record("iris"), 10)
    fresh.set_alias("iris", "stable", 1)
    for ref in ("iris", "iris@stable", "iris:1"):
        assert fresh.resolve(ref) == strict.resolve(ref) == model_id
    other = f"m_{uuid.uuid4().hex}"
    fresh.add(other, record("other"), 10)
    stopped.stop("immediate")
    time.sleep(0.05)  # past the kept period: every resolve below asks the database first
    for ref in ("iris", "iris@stable", "iris:1", model_id):  # the id: named by the last answer
        assert fresh.resolve(ref) == model_id
        with pytest.raises(DatabaseUnavailable):
            strict.resolve(ref)
    with pytest.raises(DatabaseUnavailable):  # never answered: nothing to fall back on
        fresh.resolve("other")


def test_a_stale_answer_expires_after_stale_if_error(database, stopped):
    registry, model_id = resolved_once(database, stale_if_error_s=0.2)
    stopped.stop("immediate")
    assert registry.resolve("iris") == model_id
    time.sleep(0.3)
    with pytest.raises(DatabaseUnavailable):
        registry.resolve("iris")


def test_a_deleted_model_is_never_a_stale_answer(database, stopped):
    registry, model_id = resolved_once(database, stale_if_error_s=300)
    registry.delete(model_id)
    stopped.stop("immediate")
    with pytest.raises(DatabaseUnavailable):
        registry.resolve("iris")


@pytest.fixture()
def proxied_store(s3_proxy: TcpProxy) -> ArtifactStore:
    store = ArtifactStore(
        f"s3://{BUCKET}/{uuid.uuid4().hex}", endpoint_url=s3_proxy.url, timeout_s=1.5
    )
    # its client built, as the server builds it at start (a loaded machine may need two tries)
    assert store.warm_up() or store.warm_up()
    return store


@pytest.mark.parametrize("mode", ["refuse", "hang"])
def test_a_store_that_refuses_or_hangs_is_unavailable(proxied_store, s3_proxy, mode):
    model_id = f"m_{uuid.uuid4().hex}"
    proxied_store.put(model_id, b"bytes")
    configured = proxied_store.timeout_s
    proxied_store.timeout_s = FAULT_TIMEOUT_S  # read at every call
    with s3_proxy.fault(mode):
        for call, args in [
            (proxied_store.get, (model_id,)),
            (proxied_store.put, (f"m_{uuid.uuid4().hex}", b"more")),
            (proxied_store.exists, (model_id,)),
            (proxied_store.delete, (model_id,)),
        ]:
            with pytest.raises(StoreUnavailable) as caught:
                bounded(call, *args)
            assert caught.value.code == "STORE_UNAVAILABLE"
            assert int(caught.value.headers["Retry-After"]) > 0
        assert bounded(proxied_store.is_usable, FAULT_TIMEOUT_S) is False
        assert proxied_store.outage.is_down
    proxied_store.timeout_s = configured
    assert recovered(proxied_store.get, model_id) == b"bytes"
    assert not proxied_store.outage.is_down
    with pytest.raises(FileNotFoundError):  # missing is not unavailable
        proxied_store.get(f"m_{uuid.uuid4().hex}")


def test_a_hanging_check_answers_false_in_time_and_runs_once():
    release = threading.Event()
    calls = []

    def hangs(timeout_s: float) -> bool:
        calls.append(timeout_s)
        release.wait(BOUND_S)
        return True

    checks = {"hangs": BoundedCheck("hangs", hangs), "fine": BoundedCheck("fine", lambda _: True)}
    assert bounded(run_checks, checks, 0.2) == {"hangs": False, "fine": True}
    assert bounded(run_checks, checks, 0.2) == {"hangs": False, "fine": True}
    assert len(calls) == 1  # the hanging one was waited for again, not started twice
    release.set()
    assert bounded(run_checks, checks, BOUND_S) == {"hangs": True, "fine": True}
