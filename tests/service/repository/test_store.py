"""The model store: artifact then row, integrity checks, names/versions/aliases, LRU, restart."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time

import joblib
import numpy as np
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sqlalchemy import update

from service.errors import (
    ArtifactMissing,
    ArtifactRefused,
    InvalidInput,
    NotFound,
    StoreUnavailable,
)
from service.logs import JsonFormatter
from service.repository.artifacts import ArtifactExists
from service.repository.opening import open_store
from service.repository.references import is_model_id
from service.repository.store import ModelStore
from service.repository.tables import models
from service.settings import Settings


def fitted(seed: int = 0) -> LinearDiscriminantAnalysis:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(30, 3))
    return LinearDiscriminantAnalysis().fit(X, np.arange(30) % 2)


def record(name: str = "demo", created_at: str = "2026-01-01T00:00:00") -> dict:
    return {"name": name, "model_type": "lda", "created_at": created_at, "classes": [0, 1]}


@pytest.fixture()
def store(settings: Settings) -> ModelStore:
    return open_store(settings)


def reopen(settings: Settings, **overrides) -> ModelStore:
    """A second store on the same database and artifacts (another process, or a restart)."""
    return open_store(Settings(**{**settings.model_dump(), **overrides}))


def artifact_path(settings: Settings, model_id: str):
    return settings.models_path / model_id / "model.joblib"


def bound_digest(key: bytes, model_id: str, rec: dict, blob: bytes) -> str:
    """The v2 signature, written out here independently of service.repository.signing."""
    derived = hmac.new(key, b"bsvm artifact signature v2", hashlib.sha256).digest()
    who = {
        "feature_names": rec.get("feature_names"),
        "model_id": model_id,
        "model_type": rec["model_type"],
        "n_features": rec.get("n_features"),
    }
    header = json.dumps(who, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(
        derived, len(header).to_bytes(8, "big") + header + blob, hashlib.sha256
    ).hexdigest()


def test_save_writes_the_artifact_then_a_row(store, settings):
    rec = store.save(fitted(), record())
    folder = settings.models_path / rec["model_id"]
    assert is_model_id(rec["model_id"])
    assert sorted(p.name for p in folder.iterdir()) == ["model.joblib"]
    on_disk = store.get_record(rec["model_id"])
    key = settings.signing_key_path.read_bytes()  # generated on first start: always signed
    blob = (folder / "model.joblib").read_bytes()
    assert on_disk["artifact_sha256"] == bound_digest(key, rec["model_id"], on_disk, blob)
    assert on_disk["artifact_digest"] == "hmac-sha256-v2" and on_disk["version"] == 1
    assert not [p for p in settings.models_path.rglob("*") if p.name.startswith(".tmp")]


def test_a_row_that_cannot_be_written_takes_its_artifact_back(store, settings, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(store.registry, "add", broken)
    with pytest.raises(RuntimeError):
        store.save(fitted(), record())
    assert not list(settings.models_path.rglob("model.joblib"))


def test_load_round_trips_the_estimator(store, settings):
    est = fitted()
    rec = store.save(est, record())
    fresh = reopen(settings)
    X = np.random.default_rng(1).normal(size=(5, 3))
    np.testing.assert_array_equal(
        fresh.load(rec["model_id"]).predict_proba(X), est.predict_proba(X)
    )


def test_versions_are_immutable_and_never_reused(store, settings):
    first = store.save(fitted(), record())
    second = store.save(fitted(1), record())
    assert (first["version"], second["version"]) == (1, 2)
    store.delete(second["model_id"])
    assert store.save(fitted(2), record())["version"] == 3
    restarted = reopen(settings)
    assert restarted.save(fitted(3), record())["version"] == 4


def test_restart_finds_every_model_and_alias(store, settings):
    ids = [store.save(fitted(i), record(f"n{i % 2}"))["model_id"] for i in range(4)]
    store.set_alias("n0", "stable", 1)
    restarted = reopen(settings)
    items, total = restarted.list_records()
    assert total == 4 and {r["model_id"] for r in items} == set(ids)
    assert restarted.resolve("n0@stable") == ids[0]
    assert restarted.resolve("n0") == ids[2]
    assert restarted.get_record(ids[0])["aliases"] == ["stable"]


def test_resolve_forms(store):
    a = store.save(fitted(), record())["model_id"]
    b = store.save(fitted(1), record())["model_id"]
    store.set_alias("demo", "canary", 1)
    assert store.resolve(a) == a
    assert store.resolve("demo") == b
    assert store.resolve("demo:1") == a
    assert store.resolve("demo@canary") == a
    for missing in ("other", "demo:9", "demo@nope", "m_" + "0" * 32):
        with pytest.raises(NotFound):
            store.resolve(missing)
    for malformed in ("../etc/passwd", "demo:x", "demo@1bad", "a" * 65):
        with pytest.raises(InvalidInput):
            store.resolve(malformed)


def test_tampered_artifact_is_refused_and_never_unpickled(store, settings, monkeypatch, caplog):
    rec = store.save(fitted(), record())
    store.cache.clear()
    path = artifact_path(settings, rec["model_id"])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))

    def no_unpickling(*args, **kwargs):
        raise AssertionError("a refused artifact must not be unpickled")

    monkeypatch.setattr(joblib, "load", no_unpickling)
    with pytest.raises(ArtifactRefused) as info:
        store.load(rec["model_id"])
    assert info.value.status_code == 409 and "integrity" in info.value.message
    refused = [r for r in caplog.records if "refused" in r.getMessage()]
    line = json.loads(JsonFormatter().format(refused[-1]))  # the log line as the server writes it
    assert line["model_id"] == rec["model_id"] and line["level"] == "ERROR"


def test_a_truncated_artifact_is_refused_a_missing_one_is_missing(store, settings):
    rec = store.save(fitted(), record())
    store.cache.clear()
    path = artifact_path(settings, rec["model_id"])
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ArtifactRefused):
        store.load(rec["model_id"])
    path.unlink()
    with pytest.raises(ArtifactMissing) as info:
        store.load(rec["model_id"])
    assert info.value.status_code == 404 and info.value.code == "ARTIFACT_MISSING"
    assert rec["model_id"] in info.value.message and "missing" in info.value.message


def test_signing_key_records_an_hmac_checked_on_load(settings):
    signed = reopen(settings, signing_key="k1")
    rec = signed.save(fitted(), record())
    artifact = artifact_path(settings, rec["model_id"]).read_bytes()
    assert rec["artifact_digest"] == "hmac-sha256-v2"
    assert rec["artifact_sha256"] == bound_digest(b"k1", rec["model_id"], rec, artifact)
    assert reopen(settings, signing_key="k1").load(rec["model_id"])
    for other in (reopen(settings, signing_key="k2"), reopen(settings)):  # reopen: generated key
        with pytest.raises(ArtifactRefused):
            other.load(rec["model_id"])


def test_a_replaced_artifact_with_a_rewritten_digest_is_never_unpickled(
    store, settings, monkeypatch
):
    """Whoever can write artifacts and rows still cannot make the server unpickle their bytes."""
    rec = store.save(fitted(), record())
    store.cache.clear()
    path = artifact_path(settings, rec["model_id"])
    path.write_bytes(b"\x80\x04 not the model")
    for alg, digest in (
        ("sha256", hashlib.sha256(path.read_bytes()).hexdigest()),
        ("hmac-sha256", hmac.new(b"guess", path.read_bytes(), hashlib.sha256).hexdigest()),
        ("hmac-sha256-v2", bound_digest(b"guess", rec["model_id"], rec, path.read_bytes())),
    ):
        with store.db.write() as conn:
            forged = {**store.get_record(rec["model_id"]), "artifact_sha256": digest}
            forged["artifact_digest"] = alg
            conn.execute(
                update(models)
                .where(models.c.model_id == rec["model_id"])
                .values(record=json.dumps(forged))
            )
        monkeypatch.setattr(joblib, "load", lambda *a, **k: pytest.fail("unpickled"))
        with pytest.raises(ArtifactRefused):
            store.load(rec["model_id"])


def test_the_generated_key_is_private_and_outside_the_artifacts(store, settings):
    key = settings.signing_key_path
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    assert settings.models_path.resolve() not in key.resolve().parents
    assert reopen(settings).signer.digest(b"x") == store.signer.digest(b"x")  # reused, not remade


def test_ids_outside_the_pattern_never_touch_the_disk(store):
    for bad in ("../models", "m_" + "0" * 31 + "/", "names.json", "m_" + "a" * 33):
        with pytest.raises(NotFound):
            store.load(bad)
        with pytest.raises(NotFound):
            store.delete(bad)


def test_loaded_models_are_bounded_in_bytes(settings):
    probe = open_store(settings)
    size = probe.save(fitted(), record())["artifact_bytes"]
    store = reopen(settings, model_cache_mb=2.5 * size / 2**20)
    ids = [store.save(fitted(i), record())["model_id"] for i in range(3)]
    assert store.cached_count == 2 and store.cache.bytes_used <= 2.5 * size
    store.cache.clear()
    for model_id in ids:
        store.load(model_id)
    assert store.cached_count == 2 and ids[0] not in store.cache and ids[2] in store.cache


def test_delete_removes_files_cache_and_aliases(store, settings):
    rec = store.save(fitted(), record())
    store.set_alias("demo", "stable", 1)
    store.delete(rec["model_id"])
    assert not artifact_path(settings, rec["model_id"]).exists()
    assert store.cached_count == 0
    with pytest.raises(NotFound):
        store.resolve("demo@stable")
    with pytest.raises(NotFound):
        store.get_record(rec["model_id"])


def test_the_row_commits_only_once_its_artifact_is_on_disk(store, settings, monkeypatch):
    """A local put runs beside the row's statements; the transaction waits for it to commit."""
    put, release, putting = store.artifacts.put, threading.Event(), threading.Event()

    def slow_put(model_id: str, data: bytes) -> None:
        putting.set()
        assert release.wait(30)
        put(model_id, data)

    monkeypatch.setattr(store.artifacts, "put", slow_put)
    pending = store.prepare(fitted(), record())
    saved: list[dict] = []
    saving = threading.Thread(target=lambda: saved.append(store.save_prepared(pending)))
    saving.start()
    assert putting.wait(30)
    time.sleep(0.2)  # the row's statements are done meanwhile: it is not committed
    assert not store.has_row(pending.model_id)
    release.set()
    saving.join(30)
    assert saved and saved[0]["model_id"] == pending.model_id
    assert reopen(settings).has_row(pending.model_id)
    assert artifact_path(settings, pending.model_id).read_bytes() == pending.data


def test_a_failed_put_rolls_the_row_back_and_is_raised_as_it_was(store, settings, monkeypatch):
    def down(model_id: str, data: bytes) -> None:
        raise StoreUnavailable("the artifact folder cannot be written; retry later")

    pending = store.prepare(fitted(), record())
    with monkeypatch.context() as patched:
        patched.setattr(store.artifacts, "put", down)
        with pytest.raises(StoreUnavailable):
            store.save_prepared(pending)
    assert not store.has_row(pending.model_id)
    other = store.prepare(fitted(1), record())
    store.artifacts.put(other.model_id, b"other bytes under this id")
    with pytest.raises(ArtifactExists):  # bytes that differ are never replaced, nor removed
        store.save_prepared(other)
    assert not store.has_row(other.model_id)
    assert artifact_path(settings, other.model_id).read_bytes() == b"other bytes under this id"
    assert store.save_prepared(pending)["version"] == 1  # the retry after the outage
