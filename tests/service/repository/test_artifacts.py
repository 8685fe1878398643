"""ArtifactStore: the same behaviour on file:// and on S3 (moto in server mode, real HTTP)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from service.repository.artifacts import (
    ARTIFACT,
    ArtifactExists,
    ArtifactStore,
    check_model_id,
    local_url,
)
from tests.service.conftest import BUCKET

HOUR = 3600.0

MakeStore = Callable[..., ArtifactStore]


def new_id() -> str:
    """A fresh well-formed model id."""
    return f"m_{uuid.uuid4().hex}"


def write_raw(store: ArtifactStore, rel: str, data: bytes = b"x") -> str:
    """Write a file at ``<root>/<rel>`` behind the store's back; return its full path."""
    path = f"{store.root}/{rel}"
    if store.local:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    store.fs.pipe_file(path, data)
    return path


def raw_exists(store: ArtifactStore, path: str) -> bool:
    """True when ``path`` exists (asked of the filesystem, not of the store)."""
    return bool(store.fs.isfile(path))


@pytest.fixture(params=["file", "s3"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> MakeStore:
    """Factory of stores on a fresh root of the backend: ``make_store(suffix="")``."""
    prefix = uuid.uuid4().hex
    if request.param == "file":
        return lambda suffix="": ArtifactStore(local_url(tmp_path / f"{prefix}{suffix}"))
    endpoint = request.getfixturevalue("s3_endpoint")
    return lambda suffix="": ArtifactStore(f"s3://{BUCKET}/{prefix}{suffix}", endpoint_url=endpoint)


@pytest.fixture()
def store(make_store: MakeStore) -> ArtifactStore:
    """A store on a fresh, empty root."""
    return make_store()


def test_put_get_exists_size(store: ArtifactStore) -> None:
    model_id, data = new_id(), os.urandom(4096)
    assert not store.exists(model_id)
    store.put(model_id, data)
    assert store.exists(model_id)
    assert store.get(model_id) == data
    assert store.size(model_id) == len(data)
    assert raw_exists(store, f"{store.root}/{model_id}/{ARTIFACT}")


def test_missing_artifact_is_file_not_found(store: ArtifactStore) -> None:
    with pytest.raises(FileNotFoundError):
        store.get(new_id())
    with pytest.raises(FileNotFoundError):
        store.size(new_id())


def test_write_once(store: ArtifactStore) -> None:
    model_id = new_id()
    store.put(model_id, b"first")
    with pytest.raises(ArtifactExists):
        store.put(model_id, b"second")
    assert store.get(model_id) == b"first"


def test_delete_is_idempotent(store: ArtifactStore) -> None:
    model_id, other = new_id(), new_id()
    store.put(model_id, b"a")
    store.put(other, b"b")
    store.delete(model_id)
    assert not store.exists(model_id)
    with pytest.raises(FileNotFoundError):
        store.get(model_id)
    store.delete(model_id)
    assert store.get(other) == b"b"


def test_delete_removes_legacy_record_too(store: ArtifactStore) -> None:
    model_id = new_id()
    store.put(model_id, b"a")
    record = write_raw(store, f"{model_id}/record.json", b"{}")
    store.delete(model_id)
    assert not raw_exists(store, record)


@pytest.mark.parametrize(
    "bad",
    [
        "../x",
        "m_../../etc",
        "m_" + "A" * 32,
        "m_" + "0" * 31,
        "m_" + "c" * 32 + "/../x",
        "",
        "/abs",
    ],
)
def test_malformed_ids_are_refused(store: ArtifactStore, bad: str) -> None:
    for call in (store.get, store.exists, store.size, store.delete):
        with pytest.raises(ValueError):
            call(bad)
    with pytest.raises(ValueError):
        store.put(bad, b"x")
    with pytest.raises(ValueError):
        check_model_id(bad)


def test_is_usable(store: ArtifactStore) -> None:
    assert store.is_usable()


def test_the_usable_check_waits_no_longer_than_the_store_timeout(s3_endpoint: str) -> None:
    # bounds far above moto's answer time, so a loaded machine cannot fail the calls themselves
    store = ArtifactStore(f"s3://{BUCKET}/p", endpoint_url=s3_endpoint, timeout_s=5.0)
    bounds: list[float | None] = []
    calls = store._call

    def recorded(method: str, *args: object, timeout_s: float | None = None, **kwargs: object):
        bounds.append(timeout_s)
        return calls(method, *args, timeout_s=timeout_s, **kwargs)

    store._call = recorded  # type: ignore[method-assign]
    assert store.is_usable(20.0) and store.is_usable(2.0) and store.is_usable()
    assert bounds == [5.0, 2.0, 5.0]


def test_missing_bucket_is_not_usable(s3_endpoint: str) -> None:
    assert not ArtifactStore("s3://no-such-bucket/p", endpoint_url=s3_endpoint).is_usable()


def test_sweep_respects_grace_rows_and_foreign_names(store: ArtifactStore) -> None:
    with_row, orphan, tmp_only = new_id(), new_id(), new_id()
    store.put(with_row, b"kept")
    store.put(orphan, b"crash between artifact and row")
    tmp = write_raw(store, f"{tmp_only}/.tmp-{uuid.uuid4().hex}")
    strays = [
        write_raw(store, "notes.txt"),
        write_raw(store, f"m_{'g' * 32}/{ARTIFACT}"),  # not a model id
        write_raw(store, f"{with_row}/other.bin"),  # not ours to judge
        write_raw(store, f"{new_id()}/sub/{ARTIFACT}"),  # too deep
    ]
    asked: list[list[str]] = []

    def has_rows(ids: list[str]) -> set[str]:
        asked.append(sorted(ids))
        return {with_row} & set(ids)

    now = time.time()
    assert store.sweep(has_rows, grace_s=HOUR, now=now) == []
    assert store.exists(orphan) and raw_exists(store, tmp)

    removed = store.sweep(has_rows, grace_s=HOUR, now=now + 2 * HOUR)
    assert sorted(removed) == sorted([f"{store.root}/{orphan}/{ARTIFACT}", tmp])
    assert asked == [sorted([with_row, orphan])]
    assert not store.exists(orphan) and not raw_exists(store, tmp)
    assert store.get(with_row) == b"kept"
    assert all(raw_exists(store, path) for path in strays)


def test_sweep_leaves_legacy_folders(store: ArtifactStore) -> None:
    legacy = new_id()
    store.put(legacy, b"old layout")
    write_raw(store, f"{legacy}/record.json", b"{}")
    assert store.sweep(lambda ids: set(), grace_s=0.0, now=time.time() + HOUR) == []
    assert store.exists(legacy)


def test_sweep_stays_inside_its_root(make_store: MakeStore) -> None:
    store, sibling = make_store(), make_store("-other")
    outside = new_id()
    sibling.put(outside, b"another root")
    store.put(new_id(), b"orphan")
    removed = store.sweep(lambda ids: set(), grace_s=0.0, now=time.time() + HOUR)
    assert len(removed) == 1 and removed[0].startswith(store.root + "/")
    assert sibling.get(outside) == b"another root"


def test_sweep_of_missing_root_is_empty(s3_endpoint: str) -> None:
    store = ArtifactStore(f"s3://{BUCKET}/{uuid.uuid4().hex}", endpoint_url=s3_endpoint)
    assert store.sweep(lambda ids: set(), grace_s=0.0) == []


# -- file:// specifics -------------------------------------------------------------------------
def test_local_put_leaves_only_the_artifact(tmp_path: Path) -> None:
    store = ArtifactStore(local_url(tmp_path))
    model_id = new_id()
    store.put(model_id, b"data")
    with pytest.raises(ArtifactExists):
        store.put(model_id, b"again")
    assert os.listdir(tmp_path / model_id) == [ARTIFACT]


def test_local_put_goes_through_a_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ArtifactStore(local_url(tmp_path))
    model_id = new_id()
    seen: list[tuple[str, str]] = []
    real_link = os.link

    def spy(src: str, dst: str) -> None:
        seen.append((os.path.basename(src), os.path.basename(dst)))
        assert Path(src).read_bytes() == b"data"  # complete and synced before it gets its name
        real_link(src, dst)

    monkeypatch.setattr(os, "link", spy)
    store.put(model_id, b"data")
    assert len(seen) == 1 and seen[0][0].startswith(".tmp-") and seen[0][1] == ARTIFACT


def test_local_put_without_hard_links_still_refuses_overwrite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: str, dst: str) -> None:
        raise PermissionError("links not supported")

    monkeypatch.setattr(os, "link", no_links)
    store = ArtifactStore(local_url(tmp_path))
    model_id = new_id()
    store.put(model_id, b"data")
    assert store.get(model_id) == b"data"
    with pytest.raises(ArtifactExists):
        store.put(model_id, b"other")
    assert store.get(model_id) == b"data"
    assert os.listdir(tmp_path / model_id) == [ARTIFACT]


def test_local_sweep_mixed_ages(tmp_path: Path) -> None:
    store = ArtifactStore(local_url(tmp_path))
    old_orphan, fresh_orphan = new_id(), new_id()
    store.put(old_orphan, b"old")
    store.put(fresh_orphan, b"fresh")
    old_tmp = write_raw(store, f"{fresh_orphan}/.tmp-old")
    fresh_tmp = write_raw(store, f"{fresh_orphan}/.tmp-fresh")
    past = time.time() - 2 * HOUR
    for path in (f"{store.root}/{old_orphan}/{ARTIFACT}", old_tmp):
        os.utime(path, (past, past))
    removed = store.sweep(lambda ids: set(), grace_s=HOUR)
    assert sorted(removed) == sorted([f"{store.root}/{old_orphan}/{ARTIFACT}", old_tmp])
    assert not (tmp_path / old_orphan).exists()  # the emptied folder goes too
    assert store.get(fresh_orphan) == b"fresh" and os.path.exists(fresh_tmp)


def test_sweep_never_leaves_the_root(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    store = ArtifactStore(local_url(root))
    model_id = new_id()
    victim = outside / model_id / ARTIFACT
    victim.parent.mkdir(parents=True)
    victim.write_bytes(b"not ours")
    (root / model_id).symlink_to(victim.parent)  # a model-shaped name leading outside
    past = time.time() - 2 * HOUR
    os.utime(victim, (past, past))
    store.sweep(lambda ids: set(), grace_s=0.0)
    assert victim.read_bytes() == b"not ours"


def test_url_validation(tmp_path: Path) -> None:
    for bad in ("file://relative/path", "gs://bucket/x", "s3://", str(tmp_path)):
        with pytest.raises(ValueError):
            ArtifactStore(bad)
    assert ArtifactStore(local_url(tmp_path / "a b")).root == str(tmp_path / "a b")
