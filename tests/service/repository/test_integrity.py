"""What write access to rows, to artifacts, or to both can do to the models served.

Each test backs one sentence of the README's "Write access to the registry or the artifacts"
section: rows and artifacts are rewritten here as an attacker would, and nothing they hold is
unpickled unless it carries this server's signature for that very model.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import pickle
from pathlib import Path

import joblib
import numpy as np
import pytest
from sqlalchemy import delete, select, update

from bsvm_core import LDA, QDA
from service.errors import ArtifactMissing, ArtifactRefused
from service.repository import legacy
from service.repository.opening import open_store
from service.repository.store import ModelStore
from service.repository.tables import aliases, models, settings_table
from service.settings import Settings


def fitted(model=LDA, seed: int = 0, n_features: int = 3):
    rng = np.random.default_rng(seed)
    return model().fit(rng.normal(size=(40, n_features)), np.arange(40) % 2)


def record(name: str = "demo", model_type: str = "lda", n_features: int = 3) -> dict:
    return {
        "name": name,
        "model_type": model_type,
        "n_features": n_features,
        "feature_names": None,
        "created_at": "2026-01-01T00:00:00",
        "classes": [0, 1],
    }


@pytest.fixture()
def store(settings: Settings) -> ModelStore:
    return open_store(settings)


def row(store: ModelStore, model_id: str) -> dict:
    with store.db.read() as conn:
        text = conn.execute(select(models.c.record).where(models.c.model_id == model_id)).scalar()
    return json.loads(text)


def write_row(store: ModelStore, model_id: str, rec: dict) -> None:
    """Rewrite a model's row as someone with write access to the database would."""
    with store.db.write() as conn:
        conn.execute(
            update(models)
            .where(models.c.model_id == model_id)
            .values(record=json.dumps(rec), model_type=rec["model_type"])
        )


def artifact(settings: Settings, model_id: str) -> Path:
    return settings.models_path / model_id / "model.joblib"


def restarted(settings: Settings) -> ModelStore:
    """Another process on the same database and artifacts: nothing loaded in memory."""
    return open_store(settings)


class Planted:
    """A pickle that, when loaded, creates the file it names: proof that it was unpickled."""

    def __init__(self, proof: Path) -> None:
        self.proof = proof

    def __reduce__(self):
        return (open, (str(self.proof), "w"))


def planted_bytes(proof: Path) -> bytes:
    return pickle.dumps(Planted(proof))


@pytest.fixture()
def never_unpickled(monkeypatch: pytest.MonkeyPatch):
    def refuse(*args, **kwargs):
        raise AssertionError("refused bytes must never be unpickled")

    monkeypatch.setattr(joblib, "load", refuse)


# -- both rows and artifacts --------------------------------------------------------------------
def test_a_planted_pickle_with_its_digest_in_its_row_is_never_unpickled(store, settings, tmp_path):
    x = store.save(fitted(), record())["model_id"]
    proof = tmp_path / "ran"
    blob = planted_bytes(proof)
    artifact(settings, x).write_bytes(blob)
    for scheme, digest in (
        ("sha256", hashlib.sha256(blob).hexdigest()),
        ("hmac-sha256", hmac.new(b"a guessed key", blob, hashlib.sha256).hexdigest()),
    ):
        write_row(store, x, {**row(store, x), "artifact_sha256": digest, "artifact_digest": scheme})
        with pytest.raises(ArtifactRefused):
            restarted(settings).load(x)
    assert not proof.exists()


def test_signed_bytes_moved_to_another_models_row_are_refused(store, settings, never_unpickled):
    """Y's signed bytes and digest copied into X's row (the issue's lda record serving another
    model's bytes) fail X's signature, whatever the two types."""
    x = store.save(fitted(LDA), record("x", "lda"))["model_id"]
    y_same = store.save(fitted(LDA, 1), record("y", "lda"))["model_id"]
    y_other = store.save(fitted(QDA, 2), record("z", "qda"))["model_id"]
    for y in (y_same, y_other):
        artifact(settings, x).write_bytes(artifact(settings, y).read_bytes())
        write_row(
            store,
            x,
            {
                **row(store, x),
                **{k: row(store, y)[k] for k in ("artifact_sha256", "artifact_digest")},
            },
        )
        with pytest.raises(ArtifactRefused):
            restarted(settings).load(x)


def test_a_row_relabelled_to_another_type_or_schema_is_refused(store, settings, never_unpickled):
    x = store.save(fitted(), record())["model_id"]
    for change in ({"model_type": "qda"}, {"n_features": 4}, {"feature_names": ["a", "b", "c"]}):
        write_row(store, x, {**row(store, x), **change})
        with pytest.raises(ArtifactRefused):
            restarted(settings).load(x)
        write_row(store, x, {**row(store, x), **record()})


def test_an_old_signature_cannot_launder_bytes_moved_between_types(store, settings, monkeypatch):
    """Rows signed before identities were bound (bytes only) still load, but bytes of another type
    moved into one are refused after the signature check, and the row is not re-signed."""
    key = settings.signing_key_path.read_bytes()
    x = store.save(fitted(LDA), record("x", "lda"))["model_id"]
    y = store.save(fitted(QDA, 1), record("y", "qda"))["model_id"]
    moved = artifact(settings, y).read_bytes()
    artifact(settings, x).write_bytes(moved)
    old = hmac.new(key, moved, hashlib.sha256).hexdigest()
    write_row(store, x, {**row(store, x), "artifact_sha256": old, "artifact_digest": "hmac-sha256"})
    fresh = restarted(settings)
    with pytest.raises(ArtifactRefused):
        fresh.load(x)
    assert row(store, x)["artifact_digest"] == "hmac-sha256" and x not in fresh.cache


def test_what_remains_old_signatures_of_one_shape_can_be_swapped(store, settings):
    """Rows signed before binding (bytes only): bytes of another model of the same type and feature
    count, with their old signature, are served under this model's id (then re-signed)."""
    key = settings.signing_key_path.read_bytes()
    x = store.save(fitted(LDA, 0), record("x"))["model_id"]
    y_est = fitted(LDA, 1)
    y = store.save(y_est, record("y"))["model_id"]
    moved = artifact(settings, y).read_bytes()
    artifact(settings, x).write_bytes(moved)
    old = hmac.new(key, moved, hashlib.sha256).hexdigest()
    write_row(store, x, {**row(store, x), "artifact_sha256": old, "artifact_digest": "hmac-sha256"})
    X = np.random.default_rng(4).normal(size=(6, 3))
    np.testing.assert_array_equal(restarted(settings).load(x).predict(X), y_est.predict(X))


# -- rows only -----------------------------------------------------------------------------------
def test_rows_signed_before_binding_still_load_and_are_re_signed(store, settings):
    key = settings.signing_key_path.read_bytes()
    est = fitted()
    x = store.save(est, record())["model_id"]
    blob = artifact(settings, x).read_bytes()
    old = hmac.new(key, blob, hashlib.sha256).hexdigest()
    write_row(store, x, {**row(store, x), "artifact_sha256": old, "artifact_digest": "hmac-sha256"})
    X = np.random.default_rng(3).normal(size=(5, 3))
    np.testing.assert_array_equal(restarted(settings).load(x).predict(X), est.predict(X))
    resigned = row(store, x)
    assert resigned["artifact_digest"] == "hmac-sha256-v2" and resigned["artifact_sha256"] != old
    np.testing.assert_array_equal(restarted(settings).load(x).predict(X), est.predict(X))


def test_rows_can_point_a_reference_at_another_stored_model(store, settings):
    """Rows are not signed: moving an alias in the database moves what ``name@alias`` serves."""
    x = store.save(fitted(LDA, 0), record("n"))["model_id"]
    y = store.save(fitted(LDA, 1), record("n"))["model_id"]
    store.set_alias("n", "stable", 1)
    with store.db.write() as conn:
        conn.execute(update(aliases).where(aliases.c.name == "n").values(version=2))
    fresh = restarted(settings)
    assert fresh.resolve("n@stable") == y != x
    assert fresh.load(y) is not None


def test_a_plain_sha256_in_a_row_is_refused(store, settings, never_unpickled):
    x = store.save(fitted(), record())["model_id"]
    digest = hashlib.sha256(artifact(settings, x).read_bytes()).hexdigest()
    write_row(store, x, {**row(store, x), "artifact_sha256": digest, "artifact_digest": "sha256"})
    with pytest.raises(ArtifactRefused):
        restarted(settings).load(x)


# -- artifacts only ------------------------------------------------------------------------------
def test_replaced_bytes_are_refused_and_never_unpickled(store, settings, tmp_path):
    x = store.save(fitted(), record())["model_id"]
    proof = tmp_path / "ran"
    artifact(settings, x).write_bytes(planted_bytes(proof))
    with pytest.raises(ArtifactRefused):
        restarted(settings).load(x)
    assert not proof.exists()


def test_a_deleted_artifact_is_missing_not_refused(store, settings):
    x = store.save(fitted(), record())["model_id"]
    artifact(settings, x).unlink()
    with pytest.raises(ArtifactMissing) as info:
        restarted(settings).load(x)
    assert info.value.status_code == 404 and x in info.value.message


# -- the folder of the pre-database layout -------------------------------------------------------
def old_folder(models_dir: Path, i: int, rec: dict, blob: bytes) -> str:
    model_id = "m_" + f"{i:032x}"
    folder = models_dir / model_id
    folder.mkdir(parents=True)
    (folder / "model.joblib").write_bytes(blob)
    (folder / "record.json").write_text(json.dumps({**rec, "model_id": model_id}))
    return model_id


def test_a_planted_legacy_pickle_is_never_imported_at_start_nor_signed(
    settings, tmp_path, monkeypatch
):
    """The issue's attack: remove the import's marker, plant an old-layout folder whose record
    holds the plain SHA-256 of a pickle that runs code, restart. Nothing is imported at start; an
    operator's import lists it but signs nothing, and a load refuses it without unpickling."""
    store = open_store(settings)
    proof = tmp_path / "ran"
    blob = planted_bytes(proof)
    rec = {**record("planted"), "version": 1, "artifact_digest": "sha256"}
    rec["artifact_sha256"] = hashlib.sha256(blob).hexdigest()
    planted = old_folder(settings.models_path, 7, rec, blob)
    with store.db.write() as conn:
        conn.execute(delete(settings_table).where(settings_table.c.key.like("legacy_import:%")))
    again = restarted(settings)
    assert again.list_records()[1] == 0
    monkeypatch.setenv("BSVM_DATA_DIR", str(settings.data_dir))
    assert legacy.main([]) == 0
    assert row(again, planted)["artifact_sha256"] == rec["artifact_sha256"]  # not signed
    with pytest.raises(ArtifactRefused):
        restarted(settings).load(planted)
    assert not proof.exists()


def test_the_operators_import_keeps_names_versions_aliases_and_old_signatures(settings):
    key = settings.signing_key_path
    store = open_store(settings)  # creates the key the old server would have had
    raw = key.read_bytes()
    old = {}
    for i, name in enumerate(["a", "a", "b"], start=1):
        est = fitted(LDA, i)
        path = settings.data_dir / f"blob{i}"
        joblib.dump(est, path)
        blob = path.read_bytes()
        rec = {**record(name), "version": 1 + (i == 2)}
        rec["artifact_sha256"] = hmac.new(raw, blob, hashlib.sha256).hexdigest()
        rec["artifact_digest"] = "hmac-sha256"
        old[old_folder(settings.models_path, i, rec, blob)] = est
    names = {"a": {"next_version": 5, "aliases": {"stable": 1}}, "b": {"next_version": 2}}
    (settings.models_path / "names.json").write_text(json.dumps(names))
    assert legacy.import_folder(settings.models_path, store.registry) == 3
    assert store.resolve("a@stable") == "m_" + f"{1:032x}"
    assert store.resolve("a") == "m_" + f"{2:032x}"
    X = np.random.default_rng(5).normal(size=(4, 3))
    for model_id, est in old.items():
        np.testing.assert_array_equal(restarted(settings).load(model_id).predict(X), est.predict(X))
        assert row(store, model_id)["artifact_digest"] == "hmac-sha256-v2"
    assert store.save(fitted(), record("a"))["version"] == 5
    assert legacy.import_folder(settings.models_path, store.registry) == 0  # nothing twice


def test_the_import_refuses_a_folder_that_is_not_the_artifact_root(
    settings, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("BSVM_DATA_DIR", str(settings.data_dir))
    assert legacy.main([str(tmp_path / "elsewhere")]) == 2
    assert "not the root of the artifact store" in capsys.readouterr().err
