"""The model store: one folder per model under ``model_dir``, names with versions, aliases, LRU.

Layout::

    model_dir/
      names.json                 {name: {"next_version": n, "aliases": {alias: version}}}
      m_<32 hex>/model.joblib    the fitted estimator (joblib)
      m_<32 hex>/record.json     the model record; written last, so it marks a complete model

Every file is written to a temporary file in the same folder, fsynced and renamed into place, and
the folder is fsynced, so a crash never leaves half a model. The artifact's sha256 (HMAC-SHA256
when ``signing_key`` is set) is recorded and checked against the bytes before every load; a
mismatch is refused and logged and the bytes are never unpickled. With a signing key configured,
plain-sha256 artifacts are refused too (anyone who can write files could forge those).
Versions of a name are immutable and never reused, even after a delete.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import os
import re
import shutil
import threading
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

import joblib

from service.errors import ArtifactRefused, InvalidInput, NotFound, detail
from service.settings import Settings

logger = logging.getLogger("service.repository.store")

MODEL_ID_PATTERN = r"^m_[0-9a-f]{32}$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ALIAS_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,31}$"
ARTIFACT = "model.joblib"
RECORD = "record.json"
NAMES = "names.json"

_ID_RE = re.compile(MODEL_ID_PATTERN)
_NAME_RE = re.compile(NAME_PATTERN)
_ALIAS_RE = re.compile(ALIAS_PATTERN)


def is_model_id(value: str) -> bool:
    """True when ``value`` has the shape of a server-generated model id."""
    return bool(_ID_RE.fullmatch(value))


def new_model_id() -> str:
    """A fresh model id: ``m_`` and 32 hex digits."""
    return f"m_{uuid.uuid4().hex}"


def check_name(name: str, field: str = "name") -> str:
    """Return ``name`` or raise 422 unless it matches ``NAME_PATTERN``."""
    if not _NAME_RE.fullmatch(name):
        raise InvalidInput("invalid model name", [detail(field, f"must match {NAME_PATTERN}")])
    return name


def _fsync_dir(path: Path) -> None:
    """Flush a directory entry (the rename) to disk where the OS allows it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it and rename it into place."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


class ModelStore:
    """Models on disk plus an in-memory index of their records and an LRU of loaded estimators.

    Parameters
    ----------
    settings : Settings
        Uses ``model_dir``, ``signing_key`` and ``model_cache_size``.
    """

    def __init__(self, settings: Settings) -> None:
        self.root = Path(settings.model_dir).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        key = settings.signing_key
        self._key = key.get_secret_value().encode() if key is not None else None
        self.digest_alg = "hmac-sha256" if self._key else "sha256"
        self.cache_size = settings.model_cache_size
        self._lock = threading.RLock()
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._records: dict[str, dict[str, Any]] = {}
        self._names: dict[str, dict[str, Any]] = {}
        self.reload()

    # -- index ---------------------------------------------------------------------------------
    def reload(self) -> None:
        """Rebuild the index from disk: every folder with a readable record is a model."""
        records: dict[str, dict[str, Any]] = {}
        for entry in self.root.iterdir():
            if not (entry.is_dir() and is_model_id(entry.name)):
                continue
            try:
                record = json.loads((entry / RECORD).read_text())
            except FileNotFoundError:
                logger.warning("model folder %s has no record (incomplete save); ignored", entry)
                continue
            except (OSError, ValueError):
                logger.error("model record in %s is unreadable; ignored", entry)
                continue
            if record.get("model_id") != entry.name:
                logger.error("model record in %s names another id; ignored", entry)
                continue
            records[entry.name] = record
        try:
            names = json.loads((self.root / NAMES).read_text())
        except FileNotFoundError:
            names = {}
        except (OSError, ValueError):
            logger.error("%s is unreadable; rebuilt from the records", self.root / NAMES)
            names = {}
        for record in records.values():
            entry = names.setdefault(record["name"], {"next_version": 1, "aliases": {}})
            entry["next_version"] = max(entry.get("next_version", 1), record["version"] + 1)
            entry.setdefault("aliases", {})
        with self._lock:
            self._records = records
            self._names = names

    def _save_names(self) -> None:
        atomic_write(self.root / NAMES, json.dumps(self._names, indent=1, sort_keys=True).encode())

    def is_usable(self) -> bool:
        """True when the model folder exists and is writable."""
        return self.root.is_dir() and os.access(self.root, os.W_OK | os.X_OK)

    @property
    def cached_count(self) -> int:
        """Number of estimators currently held in the LRU cache."""
        return len(self._cache)

    # -- records -------------------------------------------------------------------------------
    def _with_aliases(self, record: dict[str, Any]) -> dict[str, Any]:
        aliases = self._names.get(record["name"], {}).get("aliases", {})
        out = dict(record)
        out["aliases"] = sorted(a for a, v in aliases.items() if v == record["version"])
        return out

    def get_record(self, model_id: str) -> dict[str, Any]:
        """The record of ``model_id`` (404 when unknown)."""
        with self._lock:
            record = self._records.get(model_id)
            if record is None:
                raise NotFound(f"no model with id {model_id!r}")
            return self._with_aliases(record)

    def list_records(
        self, name: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of records, newest first, optionally of one name; and the total count."""
        with self._lock:
            chosen = [r for r in self._records.values() if name is None or r["name"] == name]
            chosen.sort(key=lambda r: (r["created_at"], r["version"]), reverse=True)
            page = [self._with_aliases(r) for r in chosen[offset : offset + limit]]
        return page, len(chosen)

    def resolve(self, ref: str, field: str = "model") -> str:
        """Model id of ``ref``: an id, ``name`` (latest version), ``name@alias`` or ``name:version``."""
        if is_model_id(ref):
            if ref not in self._records:
                raise NotFound(f"no model with id {ref!r}")
            return ref
        name, sep, rest = ref.partition("@")
        version: int | None = None
        if not sep:
            name, sep, rest = ref.partition(":")
            if sep:
                if not rest.isdigit() or len(rest) > 9:
                    raise InvalidInput("invalid model reference", [detail(field, "bad version")])
                version = int(rest)
        check_name(name, field)
        with self._lock:
            entry = self._names.get(name)
            if entry is None:
                raise NotFound(f"no model named {name!r}")
            if sep == "@":
                if not _ALIAS_RE.fullmatch(rest):
                    raise InvalidInput("invalid model reference", [detail(field, "bad alias")])
                version = entry["aliases"].get(rest)
                if version is None:
                    raise NotFound(f"model {name!r} has no alias {rest!r}")
            versions = {r["version"]: i for i, r in self._records.items() if r["name"] == name}
            if not versions:
                raise NotFound(f"no model named {name!r}")
            if version is None:
                return versions[max(versions)]
            if version not in versions:
                raise NotFound(f"model {name!r} has no version {version}")
            return versions[version]

    # -- artifacts -----------------------------------------------------------------------------
    def _digest(self, data: bytes) -> str:
        if self._key:
            return hmac.new(self._key, data, hashlib.sha256).hexdigest()
        return hashlib.sha256(data).hexdigest()

    def _folder(self, model_id: str) -> Path:
        """The folder of ``model_id``, guaranteed to be a direct child of the model dir."""
        if not is_model_id(model_id):
            raise NotFound(f"no model with id {model_id!r}")
        folder = (self.root / model_id).resolve()
        if folder.parent != self.root:
            raise NotFound(f"no model with id {model_id!r}")
        return folder

    def save(self, estimator: Any, record: dict[str, Any]) -> dict[str, Any]:
        """Store a fitted estimator with its record; assign id and version; return the record."""
        buffer = io.BytesIO()
        joblib.dump(estimator, buffer)
        data = buffer.getvalue()
        name = check_name(record["name"])
        model_id = new_model_id()
        folder = self._folder(model_id)
        with self._lock:
            entry = self._names.setdefault(name, {"next_version": 1, "aliases": {}})
            version = entry["next_version"]
            entry["next_version"] = version + 1
            self._save_names()
        full = {
            **record,
            "model_id": model_id,
            "version": version,
            "artifact_sha256": self._digest(data),
            "artifact_digest": self.digest_alg,
            "artifact_bytes": len(data),
        }
        full.pop("aliases", None)
        folder.mkdir()
        try:
            atomic_write(folder / ARTIFACT, data)
            atomic_write(folder / RECORD, json.dumps(full, indent=1, sort_keys=True).encode())
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        _fsync_dir(self.root)
        with self._lock:
            self._records[model_id] = full
            self._remember(model_id, estimator)
            return self._with_aliases(full)

    def _remember(self, model_id: str, estimator: Any) -> None:
        self._cache[model_id] = estimator
        self._cache.move_to_end(model_id)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def load(self, model_id: str) -> Any:
        """The fitted estimator of ``model_id``: from the LRU, or from disk after its check."""
        with self._lock:
            if model_id in self._cache:
                self._cache.move_to_end(model_id)
                return self._cache[model_id]
            record = self._records.get(model_id)
        if record is None:
            raise NotFound(f"no model with id {model_id!r}")
        path = self._folder(model_id) / ARTIFACT
        try:
            data = path.read_bytes()
        except OSError:
            data = b""
        expected = str(record.get("artifact_sha256", ""))
        if record.get("artifact_digest", "sha256") != self.digest_alg or not hmac.compare_digest(
            self._digest(data), expected
        ):
            logger.error(
                "artifact of model %s failed its %s check; refused, not loaded",
                model_id,
                self.digest_alg,
                extra={"model_id": model_id},
            )
            raise ArtifactRefused(
                f"the stored artifact of model {model_id} failed its integrity check "
                f"({self.digest_alg}); it was not loaded. Retrain or restore the model."
            )
        estimator = joblib.load(io.BytesIO(data))
        with self._lock:
            self._remember(model_id, estimator)
        return estimator

    # -- mutation ------------------------------------------------------------------------------
    def delete(self, model_id: str) -> dict[str, Any]:
        """Remove a model (folder, cache, aliases that point at it); return its last record."""
        folder = self._folder(model_id)
        with self._lock:
            record = self.get_record(model_id)
            trash = self.root / f".trash-{model_id}-{uuid.uuid4().hex[:8]}"
            os.replace(folder, trash)
            _fsync_dir(self.root)
            del self._records[model_id]
            self._cache.pop(model_id, None)
            aliases = self._names.get(record["name"], {}).get("aliases", {})
            for alias in [a for a, v in aliases.items() if v == record["version"]]:
                del aliases[alias]
            self._save_names()
        shutil.rmtree(trash, ignore_errors=True)
        return record

    def set_alias(self, name: str, alias: str, version: int) -> dict[str, Any]:
        """Point ``name@alias`` at ``version``; return that version's record."""
        check_name(name)
        if not _ALIAS_RE.fullmatch(alias):
            raise InvalidInput("invalid alias", [detail("alias", f"must match {ALIAS_PATTERN}")])
        with self._lock:
            model_id = self.resolve(f"{name}:{version}", field="version")
            self._names[name]["aliases"][alias] = version
            self._save_names()
            return self.get_record(model_id)
