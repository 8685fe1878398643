"""Resolved references kept for ``RESOLVE_CACHE_S``: forgotten at once on this process's own
writes, seen by another replica within the bound, and never kept when a write raced the read."""

from __future__ import annotations

import types
import uuid

import pytest

from service.errors import NotFound
from service.repository import reference_cache as cache_module
from service.repository.database import Database
from service.repository.reference_cache import RESOLVE_CACHE_S
from service.repository.registry import ModelRegistry
from tests.service.conftest import train_body


class Clock:
    """A ``time`` stand-in whose ``monotonic`` only moves when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def past_the_bound(self) -> None:
        self.now += RESOLVE_CACHE_S + 1e-3


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(cache_module, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    return fake


@pytest.fixture()
def replicas(tmp_path) -> tuple[ModelRegistry, ModelRegistry]:
    """Two registries (two processes' worth) on one database."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    dbs = [Database(url), Database(url)]
    dbs[0].migrate()
    yield ModelRegistry(dbs[0]), ModelRegistry(dbs[1])
    for db in dbs:
        db.dispose()


def add(registry: ModelRegistry, name: str = "demo") -> str:
    model_id = f"m_{uuid.uuid4().hex}"
    registry.add(model_id, {"name": name, "model_type": "lda", "classes": [0, 1]}, 10)
    return model_id


def test_own_writes_are_seen_at_once(replicas, clock):
    a, _ = replicas
    first = add(a)
    a.set_alias("demo", "stable", 1)
    assert a.resolve("demo") == a.resolve("demo@stable") == a.resolve("demo:1") == first
    second = add(a)  # a new version
    assert a.resolve("demo") == second
    a.set_alias("demo", "stable", 2)  # an alias moved
    assert a.resolve("demo@stable") == second
    a.delete_alias("demo", "stable")
    with pytest.raises(NotFound):
        a.resolve("demo@stable")
    a.delete(second)  # a version deleted
    assert a.resolve("demo") == first
    with pytest.raises(NotFound):
        a.resolve("demo:2")
    with pytest.raises(NotFound):
        a.resolve(second)


def test_another_replica_sees_writes_within_the_bound(replicas, clock):
    a, b = replicas
    first = add(a)
    a.set_alias("demo", "stable", 1)
    assert b.resolve("demo") == b.resolve("demo@stable") == b.resolve(first) == first
    second = add(a)
    a.set_alias("demo", "stable", 2)
    a.delete(first)
    assert b.resolve("demo") == first  # still inside the bound: the documented staleness
    clock.past_the_bound()
    assert b.resolve("demo") == b.resolve("demo@stable") == second
    assert b.resolved(first) is None
    with pytest.raises(NotFound):
        b.resolve(first)


def test_a_read_that_raced_a_write_is_not_kept(replicas, clock, monkeypatch):
    a, _ = replicas
    add(a)
    real = a.references.read

    def racing(ref: str, field: str) -> str:
        found = real(ref, field)
        a._forget()  # a write finished while this read was in flight
        return found

    monkeypatch.setattr(a.references, "read", racing)
    a.resolve("demo")
    assert a.resolved("demo") is None
    monkeypatch.setattr(a.references, "read", real)
    a.resolve("demo")
    assert a.resolved("demo") is not None


def test_a_failed_lookup_is_not_kept(replicas, clock):
    a, b = replicas
    with pytest.raises(NotFound):
        b.resolve("demo")
    model_id = add(a)
    assert b.resolve("demo") == model_id  # no clock move needed


def predicted_id(client, ref: str, X) -> tuple[int, str | None]:
    r = client.post("/predict", json={"model": ref, "X": X[:1].tolist()})
    return r.status_code, r.json().get("model_id")


def test_predict_sees_this_process_writes_at_once(client, iris, clock):
    X, y = iris
    first = client.post("/train", json=train_body(X, y, name="iris")).json()["model_id"]
    client.put("/models/by-name/iris/aliases/stable", json={"version": 1})
    for ref in ("iris", "iris@stable", first):
        assert predicted_id(client, ref, X) == (200, first)
    second = client.post("/train", json=train_body(X, y, name="iris")).json()["model_id"]
    assert predicted_id(client, "iris", X) == (200, second)
    client.put("/models/by-name/iris/aliases/stable", json={"version": 2})
    assert predicted_id(client, "iris@stable", X) == (200, second)
    assert client.delete(f"/models/{second}").status_code in (200, 204)
    assert predicted_id(client, "iris", X) == (200, first)
    assert predicted_id(client, second, X)[0] == 404
    assert predicted_id(client, "iris@stable", X)[0] == 404


def test_predict_on_a_replica_sees_writes_within_the_bound(make_client, iris, clock):
    X, y = iris
    a, b = make_client(), make_client()
    first = a.post("/train", json=train_body(X, y, name="iris")).json()["model_id"]
    assert predicted_id(b, "iris", X) == (200, first)
    second = a.post("/train", json=train_body(X, y, name="iris")).json()["model_id"]
    assert a.delete(f"/models/{first}").status_code in (200, 204)
    clock.past_the_bound()
    assert predicted_id(b, "iris", X) == (200, second)
    assert predicted_id(b, first, X)[0] == 404


def settle(registry: ModelRegistry) -> None:
    """Wait for the background reads of ``registry`` to finish."""
    refresher = registry.references._refresher
    if refresher is not None:
        refresher.submit(lambda: None).result(timeout=10)


def test_a_reference_in_use_is_read_again_before_it_expires(replicas, clock):
    a, b = replicas
    first = add(a)
    assert b.resolve("demo") == first
    clock.now += RESOLVE_CACHE_S * 0.6  # past REFRESH_AHEAD: the next use reads it again
    assert b.resolved("demo") == first
    settle(b)
    clock.now += RESOLVE_CACHE_S * 0.6  # past the first read's bound, inside the second's
    assert b.resolved("demo") == first  # still in memory: no request waited for the database


def test_a_background_read_sees_another_replicas_writes(replicas, clock):
    a, b = replicas
    first = add(a)
    assert b.resolve("demo") == b.resolve(first) == first
    second = add(a)
    a.delete(first)
    clock.now += RESOLVE_CACHE_S * 0.6
    assert b.resolve("demo") == first and b.resolve(first) == first  # inside the bound
    settle(b)
    assert b.resolved("demo") == second  # the background read kept the new answer
    assert b.resolved(first) is None  # and forgot the deleted model


def test_an_unused_reference_still_expires(replicas, clock):
    a, b = replicas
    add(a)
    b.resolve("demo")
    clock.past_the_bound()
    assert b.resolved("demo") is None and b.references._refresher is None  # nothing read again
