"""Artifact signing: HMAC-SHA256 binding a model's identity to its bytes, and the shared key.

Two schemes, named by a record's ``artifact_digest``:

* ``hmac-sha256-v2`` (every save): HMAC-SHA256 under a key derived from the signing key, over a
  domain tag, the length-prefixed canonical JSON of the model's identity (model id, model type,
  feature count and names) and then the bytes. Bytes moved to another model's row, or a row whose
  type or features were rewritten, fail it.
* ``hmac-sha256`` (before): HMAC-SHA256 under the signing key itself over the bytes alone. Rows
  signed so still verify; the store re-signs them under v2 once they verified and their
  estimator matched the row (see ``ModelStore.load``). The derived key keeps the two apart: no v1
  digest is ever a v2 digest of anything.

The key is either given in the settings (``BSVM_SIGNING_KEY``, its UTF-8 bytes, so digests of the
single-node store still verify) or read from a key file, created once with 32 random bytes and
mode 0600. Creation is race-free: the key is written to a private temporary file and hard-linked
to its name, which fails when the name exists, so a reader never sees a half-written key and
processes racing to create it all end up with the one that won.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any

from service.repository.artifacts import fsync_dir

logger = logging.getLogger("service.repository.signing")

KEY_BYTES = 32
_READ_TRIES = 50
UNBOUND = "hmac-sha256"
"""The scheme before identities were bound: the bytes alone (still verified, then re-signed)."""
BOUND = "hmac-sha256-v2"
"""The scheme of every save: the model's identity and its bytes."""
_V2_LABEL = b"bsvm artifact signature v2"


def identity(model_id: str, record: dict[str, Any]) -> dict[str, Any]:
    """What a v2 signature binds: the model id (the row's key) and the record's type and schema."""
    return {
        "model_id": model_id,
        "model_type": record.get("model_type"),
        "n_features": record.get("n_features"),
        "feature_names": record.get("feature_names"),
    }


class Signer:
    """HMAC-SHA256 digests of artifacts under one key."""

    algorithm = BOUND

    def __init__(self, key: bytes) -> None:
        if not key:
            raise ValueError("signing key must not be empty")
        self._key = bytes(key)
        self._bound_key = hmac.new(self._key, _V2_LABEL, hashlib.sha256).digest()

    def bound_digest(self, data: bytes, who: dict[str, Any]) -> str:
        """Hex v2 digest of ``data`` as the artifact of the model ``who`` (see ``identity``)."""
        header = json.dumps(who, sort_keys=True, separators=(",", ":")).encode()
        mac = hmac.new(self._bound_key, len(header).to_bytes(8, "big"), hashlib.sha256)
        mac.update(header)
        mac.update(data)
        return mac.hexdigest()

    def verify_bound(self, data: bytes, who: dict[str, Any], expected: str) -> bool:
        """True when ``expected`` is the v2 digest of ``data`` for ``who`` (constant time)."""
        return hmac.compare_digest(self.bound_digest(data, who), str(expected))

    def digest(self, data: bytes) -> str:
        """Hex v1 digest: HMAC-SHA256 of ``data`` alone (RFC 2104 with SHA-256)."""
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()

    def verify(self, data: bytes, expected: str) -> bool:
        """True when ``expected`` is the v1 digest of ``data`` (constant-time comparison)."""
        return hmac.compare_digest(self.digest(data), str(expected))


def _read_key(path: Path) -> bytes:
    """The key in ``path``, waiting briefly for a creator that could not use a hard link."""
    for _ in range(_READ_TRIES):
        key = path.read_bytes()
        if len(key) == KEY_BYTES:
            if path.stat().st_mode & 0o077:
                logger.warning("signing key file %s is readable by group or others", path)
            return key
        time.sleep(0.02)
    raise ValueError(f"signing key file {path} does not hold {KEY_BYTES} bytes")


def load_or_create_key(path: Path) -> bytes:
    """The 32-byte key in ``path``; created (random, mode 0600, atomically) when missing."""
    path = Path(path)
    if path.exists():
        return _read_key(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        _write_new_key(tmp)
        try:
            os.link(tmp, path)
            logger.info("created signing key file %s", path)
        except FileExistsError:
            pass  # another process won the race: use its key
        except OSError:  # no hard links here: exclusive create of the name itself
            _create_in_place(path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(str(path.parent))  # a key lost in a crash would orphan every signature made with it
    return _read_key(path)


def _create_in_place(path: Path) -> None:
    """Create ``path`` with O_CREAT|O_EXCL and a fresh key; do nothing when it exists."""
    try:
        _write_new_key(path)
    except FileExistsError:
        return
    logger.info("created signing key file %s", path)


def _write_new_key(path: Path) -> None:
    """Create ``path`` (O_CREAT|O_EXCL, mode 0600) holding a fresh random key, fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(KEY_BYTES))
        fh.flush()
        os.fsync(fh.fileno())


def signing_key(configured: str | None, key_file: Path) -> bytes:
    """The key of the settings when given (its UTF-8 bytes), else the one in ``key_file``."""
    if configured:
        return configured.encode()
    return load_or_create_key(key_file)
