"""Signer (HMAC-SHA256) and the shared key file."""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import threading
from pathlib import Path

import pytest

from service.repository.signing import KEY_BYTES, Signer, load_or_create_key, signing_key


def test_digest_matches_rfc_4231_test_case_2() -> None:
    signer = Signer(b"Jefe")
    expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert signer.digest(b"what do ya want for nothing?") == expected


def test_verify() -> None:
    signer = Signer(b"k" * 32)
    digest = signer.digest(b"artifact")
    assert signer.verify(b"artifact", digest)
    assert not signer.verify(b"artifacT", digest)
    assert not Signer(b"j" * 32).verify(b"artifact", digest)
    assert not signer.verify(b"artifact", hashlib.sha256(b"artifact").hexdigest())


def test_settings_key_gives_the_single_node_store_digests(tmp_path: Path) -> None:
    key = signing_key("s3cret", tmp_path / "unused.key")
    assert Signer(key).digest(b"x") == hmac.new(b"s3cret", b"x", hashlib.sha256).hexdigest()
    assert not (tmp_path / "unused.key").exists()


def test_key_file_is_created_once_private(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "signing.key"
    key = load_or_create_key(path)
    assert len(key) == KEY_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(path) == key
    assert signing_key(None, path) == key
    assert [p.name for p in path.parent.iterdir()] == ["signing.key"]


def test_racing_creators_share_one_key(tmp_path: Path) -> None:
    path = tmp_path / "signing.key"
    start = threading.Barrier(8)
    keys: list[bytes] = []

    def create() -> None:
        start.wait()
        keys.append(load_or_create_key(path))

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(keys) == 8 and set(keys) == {path.read_bytes()}


def test_key_file_without_hard_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: object, dst: object) -> None:
        raise PermissionError("links not supported")

    monkeypatch.setattr(os, "link", no_links)
    path = tmp_path / "signing.key"
    key = load_or_create_key(path)
    assert len(key) == KEY_BYTES and load_or_create_key(path) == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["signing.key"]


def test_truncated_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "signing.key"
    path.write_bytes(b"short")
    with pytest.raises(ValueError):
        load_or_create_key(path)


def test_empty_key_is_refused() -> None:
    with pytest.raises(ValueError):
        Signer(b"")
