"""The model store: fitted models as write-once artifacts plus their rows in the registry.

``save`` writes the artifact first (under a fresh model id) and then commits the row that gives it
a version, so a model is visible only once both exist; if the row cannot be written the artifact
is removed again (and the start-up sweep removes what a crash leaves). ``delete`` removes the row
first and the artifact after. Every artifact is signed: its HMAC-SHA256 under the signing key
(``BSVM_SIGNING_KEY``, or a random key the first start writes to ``BSVM_SIGNING_KEY_FILE``, mode
0600, outside the artifact store) is recorded in the row and checked against the bytes before they
are unpickled; a mismatch is refused and logged, never loaded. A plain SHA-256 in a row proves
nothing (anyone who can rewrite an artifact can rewrite its digest), so such rows are refused too. Loaded estimators are kept in an LRU
bounded in bytes; artifacts never change under an id, so a replica may keep them for ever.
"""

from __future__ import annotations

import hmac
import io
import logging
import threading
import uuid
from typing import Any

import joblib

from service.errors import ArtifactRefused, NotFound
from service.repository.artifacts import ArtifactStore
from service.repository.cache import ModelCache
from service.repository.database import Database
from service.repository.faults import CHECK_TIMEOUT_S, BoundedCheck, run_checks
from service.repository.registry import ModelRegistry, is_model_id
from service.repository.signing import Signer, signing_key
from service.settings import Settings

logger = logging.getLogger("service.repository.store")


RECORD_CACHE_SIZE = 4096
"""Model records kept in memory for predicts (a few kB each)."""


def new_model_id() -> str:
    """A fresh model id: ``m_`` and 32 hex digits."""
    return f"m_{uuid.uuid4().hex}"


class ModelStore:
    """Registry rows, artifacts and the loaded-model cache behind one object.

    Parameters
    ----------
    settings : Settings
        ``artifacts_url``, ``s3_endpoint_url``, ``signing_key``, ``model_cache_mb``.
    db : Database
        The registry database (migrated).
    """

    def __init__(self, settings: Settings, db: Database) -> None:
        self.db = db
        self.registry = ModelRegistry(db, stale_if_error_s=settings.stale_if_error_s)
        self.artifacts = ArtifactStore(
            settings.artifacts_url,
            endpoint_url=settings.s3_endpoint_url,
            timeout_s=settings.store_timeout_s,
        )
        self.cache = ModelCache(int(settings.model_cache_mb * 2**20))
        self._checks = {
            "database": BoundedCheck("database", lambda _timeout_s: db.is_usable()),
            "store": BoundedCheck("store", self.artifacts.is_usable),
        }
        self._records: dict[str, dict[str, Any]] = {}
        self._records_lock = threading.Lock()
        configured = settings.signing_key
        self.signer = Signer(
            signing_key(
                configured.get_secret_value() if configured is not None else None,
                settings.signing_key_path,
            )
        )
        self.digest_alg = Signer.algorithm

    # -- the registry's questions --------------------------------------------------------------
    def resolve(self, ref: str, field: str = "model") -> str:
        """Model id of an id, ``name``, ``name@alias`` or ``name:version`` (404/422)."""
        return self.registry.resolve(ref, field)

    def get_record(self, model_id: str) -> dict[str, Any]:
        """The record of ``model_id`` with its aliases (404 when unknown)."""
        return self.registry.get_record(model_id)

    def model_record(self, model_id: str) -> dict[str, Any]:
        """The record of ``model_id`` without its aliases, kept after the first read.

        A model's record never changes once stored (only aliases move, and they are not in it),
        so predicts read it from memory; a deleted model is refused earlier, by ``resolve``.
        """
        record = self._records.get(model_id)
        if record is None:
            record = self.registry.get_record(model_id)
            record.pop("aliases", None)
            with self._records_lock:
                self._records[model_id] = record
                while len(self._records) > RECORD_CACHE_SIZE:
                    self._records.pop(next(iter(self._records)))
        return record

    def estimator_in_memory(self, ref: str) -> Any | None:
        """The estimator of ``ref`` when its id, record and estimator are all in memory, else None.

        Answers without any I/O, so a caller can tell whether a predict would block.
        """
        model_id = self.registry.resolved(ref)
        if model_id is None or model_id not in self._records:
            return None
        return self.cache.get(model_id)

    def list_records(self, **filters: Any) -> tuple[list[dict[str, Any]], int]:
        """A page of records, newest first (see ``ModelRegistry.list_records``)."""
        return self.registry.list_records(**filters)

    def set_alias(self, name: str, alias: str, version: int) -> dict[str, Any]:
        """Point ``name@alias`` at ``version``; that version's record."""
        return self.registry.set_alias(name, alias, version)

    def check_backends(self, timeout_s: float = CHECK_TIMEOUT_S) -> dict[str, bool]:
        """``database`` and ``store``: whether each answered within ``timeout_s`` (checked at once,
        each in its own thread, so a hanging one is False in time)."""
        return run_checks(self._checks, timeout_s)

    def is_usable(self, timeout_s: float = CHECK_TIMEOUT_S) -> bool:
        """True when both the database and the artifact store answer within ``timeout_s``."""
        return all(self.check_backends(timeout_s).values())

    @property
    def cached_count(self) -> int:
        """Estimators held loaded."""
        return self.cache.count

    @property
    def cached_bytes(self) -> int:
        """Artifact bytes of the estimators held loaded."""
        return self.cache.bytes_used

    # -- artifacts -----------------------------------------------------------------------------
    def _digest(self, data: bytes) -> str:
        return self.signer.digest(data)

    def save(
        self, estimator: Any, record: dict[str, Any], *, replace_schema: bool = False
    ) -> dict[str, Any]:
        """Store a fitted estimator and its record; assign id and version; return the record.

        A name keeps the model type and feature set of its first model unless ``replace_schema``
        (409 ``NAME_SCHEMA_CONFLICT`` otherwise).
        """
        buffer = io.BytesIO()
        joblib.dump(estimator, buffer)
        data = buffer.getvalue()
        model_id = new_model_id()
        full = {
            **record,
            "artifact_sha256": self._digest(data),
            "artifact_digest": self.digest_alg,
            "artifact_bytes": len(data),
        }
        self.artifacts.put(model_id, data)
        try:
            saved = self.registry.add(model_id, full, len(data), replace_schema=replace_schema)
        except BaseException:
            self.artifacts.delete(model_id)
            raise
        self.cache.put(model_id, estimator, len(data))
        return saved

    def load(self, model_id: str) -> Any:
        """The fitted estimator of ``model_id``: from the cache, or the store after its check."""
        cached = self.cache.get(model_id)
        if cached is not None:
            return cached
        record = self.registry.get_record(model_id)
        try:
            data = self.artifacts.get(model_id)
        except (FileNotFoundError, ValueError):
            data = b""
        expected = str(record.get("artifact_sha256", ""))
        if record.get("artifact_digest", "sha256") != self.digest_alg or not hmac.compare_digest(
            self._digest(data), expected
        ):
            logger.error(
                "artifact of model %s failed its %s check; refused, not loaded",
                model_id,
                self.digest_alg,
                extra={"fields": {"model_id": model_id}},
            )
            raise ArtifactRefused(
                f"the artifact of model {model_id} failed its integrity check and was not loaded"
            )
        estimator = joblib.load(io.BytesIO(data))
        self.cache.put(model_id, estimator, len(data))
        return estimator

    def delete(self, model_id: str) -> None:
        """Delete a model: its row, its aliases, its cache entry, then its artifact."""
        if not is_model_id(model_id):
            raise NotFound(f"no model with id {model_id!r}")
        self.registry.delete(model_id)
        self.cache.discard(model_id)
        self._records.pop(model_id, None)
        try:
            self.artifacts.delete(model_id)
        except Exception:  # the row is gone, so the model is; the sweep removes the bytes
            logger.warning("artifact of deleted model %s not removed", model_id, exc_info=True)

    def sweep(self, grace_s: float) -> list[str]:
        """Remove crash debris older than ``grace_s`` (temporary files, artifacts with no row)."""
        return self.artifacts.sweep(self.registry.existing, grace_s)
