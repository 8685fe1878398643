"""The model store: atomic files, integrity checks, names/versions/aliases, LRU, restart."""

from __future__ import annotations

import hashlib
import hmac
import json

import joblib
import numpy as np
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

from service.errors import ArtifactRefused, InvalidInput, NotFound
from service.repository.store import ModelStore, is_model_id
from service.settings import Settings


def fitted(seed: int = 0) -> LinearDiscriminantAnalysis:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(30, 3))
    return LinearDiscriminantAnalysis().fit(X, np.arange(30) % 2)


def record(name: str = "demo", created_at: str = "2026-01-01T00:00:00") -> dict:
    return {"name": name, "model_type": "lda", "created_at": created_at, "classes": [0, 1]}


@pytest.fixture()
def store(settings: Settings) -> ModelStore:
    return ModelStore(settings)


def test_save_writes_artifact_and_record_atomically(store, settings):
    rec = store.save(fitted(), record())
    folder = settings.model_dir / rec["model_id"]
    assert is_model_id(rec["model_id"])
    assert sorted(p.name for p in folder.iterdir()) == ["model.joblib", "record.json"]
    on_disk = json.loads((folder / "record.json").read_text())
    assert (
        on_disk["artifact_sha256"]
        == hashlib.sha256((folder / "model.joblib").read_bytes()).hexdigest()
    )
    assert on_disk["artifact_digest"] == "sha256"
    assert not list(settings.model_dir.rglob("*.tmp"))


def test_load_round_trips_the_estimator(store):
    est = fitted()
    rec = store.save(est, record())
    fresh = ModelStore(Settings(model_dir=store.root))
    X = np.random.default_rng(1).normal(size=(5, 3))
    np.testing.assert_array_equal(
        fresh.load(rec["model_id"]).predict_proba(X), est.predict_proba(X)
    )


def test_versions_are_immutable_and_never_reused(store):
    first = store.save(fitted(), record())
    second = store.save(fitted(1), record())
    assert (first["version"], second["version"]) == (1, 2)
    store.delete(second["model_id"])
    assert store.save(fitted(2), record())["version"] == 3
    restarted = ModelStore(Settings(model_dir=store.root))
    assert restarted.save(fitted(3), record())["version"] == 4


def test_restart_finds_every_model_and_alias(store):
    ids = [store.save(fitted(i), record(f"n{i % 2}"))["model_id"] for i in range(4)]
    store.set_alias("n0", "stable", 1)
    restarted = ModelStore(Settings(model_dir=store.root))
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


def test_tampered_artifact_is_refused_and_never_unpickled(store, monkeypatch):
    rec = store.save(fitted(), record())
    store._cache.clear()
    path = store.root / rec["model_id"] / "model.joblib"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))

    def no_unpickling(*args, **kwargs):
        raise AssertionError("a refused artifact must not be unpickled")

    monkeypatch.setattr(joblib, "load", no_unpickling)
    with pytest.raises(ArtifactRefused) as info:
        store.load(rec["model_id"])
    assert info.value.status_code == 409 and "integrity" in info.value.message


def test_truncated_or_missing_artifact_is_refused(store):
    rec = store.save(fitted(), record())
    store._cache.clear()
    path = store.root / rec["model_id"] / "model.joblib"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ArtifactRefused):
        store.load(rec["model_id"])
    path.unlink()
    with pytest.raises(ArtifactRefused):
        store.load(rec["model_id"])


def test_signing_key_records_an_hmac_checked_on_load(settings):
    signed = ModelStore(Settings(model_dir=settings.model_dir, signing_key="k1"))
    rec = signed.save(fitted(), record())
    artifact = (settings.model_dir / rec["model_id"] / "model.joblib").read_bytes()
    assert rec["artifact_digest"] == "hmac-sha256"
    assert rec["artifact_sha256"] == hmac.new(b"k1", artifact, hashlib.sha256).hexdigest()
    assert ModelStore(Settings(model_dir=settings.model_dir, signing_key="k1")).load(
        rec["model_id"]
    )
    for other in (Settings(model_dir=settings.model_dir, signing_key="k2"), settings):
        with pytest.raises(ArtifactRefused):
            ModelStore(other).load(rec["model_id"])


def test_unsigned_artifact_is_refused_once_a_key_is_set(store, settings):
    rec = store.save(fitted(), record())
    with pytest.raises(ArtifactRefused):
        ModelStore(Settings(model_dir=settings.model_dir, signing_key="k")).load(rec["model_id"])


def test_ids_outside_the_pattern_never_touch_the_disk(store):
    for bad in ("../models", "m_" + "0" * 31 + "/", "names.json", "m_" + "a" * 33):
        with pytest.raises(NotFound):
            store.load(bad)
        with pytest.raises(NotFound):
            store.delete(bad)


def test_lru_cache_is_bounded(settings):
    store = ModelStore(Settings(model_dir=settings.model_dir, model_cache_size=2))
    ids = [store.save(fitted(i), record())["model_id"] for i in range(3)]
    assert store.cached_count == 2
    store._cache.clear()
    for model_id in ids:
        store.load(model_id)
    assert store.cached_count == 2 and list(store._cache) == ids[1:]


def test_folder_without_record_is_ignored(store):
    (store.root / ("m_" + "1" * 32)).mkdir()
    (store.root / ("m_" + "1" * 32) / "model.joblib").write_bytes(b"partial")
    store.reload()
    assert store.list_records() == ([], 0)


def test_delete_removes_files_cache_and_aliases(store):
    rec = store.save(fitted(), record())
    store.set_alias("demo", "stable", 1)
    store.delete(rec["model_id"])
    assert not (store.root / rec["model_id"]).exists()
    assert store.cached_count == 0
    with pytest.raises(NotFound):
        store.resolve("demo@stable")
    with pytest.raises(NotFound):
        store.get_record(rec["model_id"])
