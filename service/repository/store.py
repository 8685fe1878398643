"""The model store: fitted models as write-once artifacts plus their rows in the registry.

``save`` writes the artifact first (under a fresh model id) and then commits the row that gives it
a version, so a model is visible only once both exist; if the row cannot be written the artifact
is removed again (and the start-up sweep removes what a crash leaves). The job queue saves in two
steps, ``prepare`` (bytes, digest, a model id chosen once) and ``save_prepared`` (idempotent: the
same bytes already under the id, or the row already there, count as done), so that it can retry a
save that met a store or database outage without ever storing a model twice. ``delete`` removes the row
first and the artifact after.

Every artifact is signed (``service.repository.signing``): an HMAC-SHA256 under the signing key
(``BSVM_SIGNING_KEY``, or a random key the first start writes to ``BSVM_SIGNING_KEY_FILE``, mode
0600, outside the artifact store) over the model's id, type and features and then its bytes, is
recorded in the row and checked before the bytes are unpickled. A mismatch is refused (409
``ARTIFACT_REFUSED``) and logged, never loaded; so are bytes moved from another model's row. A
plain SHA-256 in a row proves nothing (anyone who can rewrite an artifact can rewrite its digest),
so such rows are refused too. A row signed before identities were bound (``hmac-sha256``, the
bytes alone) still loads once its bytes verify and the unpickled estimator is of the row's type
and feature count, and is then re-signed under the bound scheme. An artifact that is not there at
all is 404 ``ARTIFACT_MISSING``, not a refusal.

Loaded estimators are kept in an LRU bounded in bytes; artifacts never change under an id, so a
replica may keep them for ever.
"""

from __future__ import annotations

import hmac
import io
import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import joblib
from sqlalchemy import Connection

from service.errors import ArtifactMissing, ArtifactRefused, NotFound
from service.model_types import final_estimator, model_types
from service.repository.artifacts import ArtifactExists, ArtifactStore
from service.repository.cache import ModelCache
from service.repository.database import Database
from service.repository.faults import CHECK_TIMEOUT_S, BoundedCheck, backend_down, run_checks
from service.repository.local_files import fsync_dir
from service.repository.references import is_model_id
from service.repository.registry import ModelRegistry
from service.repository.signing import BOUND, UNBOUND, Signer, identity, signing_key
from service.settings import Settings

T = TypeVar("T")
logger = logging.getLogger("service.repository.store")


RECORD_CACHE_SIZE = 4096
"""Model records kept in memory for predicts (a few kB each)."""
PUT_THREADS = 4
"""Artifact puts to a local folder at once, each beside its row's statements."""


def new_model_id() -> str:
    """A fresh model id: ``m_`` and 32 hex digits."""
    return f"m_{uuid.uuid4().hex}"


def estimator_mismatch(estimator: Any, record: dict[str, Any]) -> str | None:
    """How an unpickled estimator differs from its row's model type and feature count; None if not."""
    spec = model_types().get(str(record.get("model_type")))
    model = final_estimator(estimator)
    if spec is None or not isinstance(model, spec.estimator_class):
        return f"it holds a {type(model).__name__}, not a {record.get('model_type')} model"
    params = model.get_params() if hasattr(model, "get_params") else {}
    if any(params.get(key) != value for key, value in spec.fixed.items()):
        return f"its estimator is not set up as a {spec.model_type} model"
    if getattr(estimator, "n_features_in_", None) != record.get("n_features"):
        return f"it takes {getattr(estimator, 'n_features_in_', '?')} features, not {record.get('n_features')}"
    return None


class _PutAfter:
    """A put's future for an artifact a training worker writes: the first question waits for
    the worker (``wait``) and, when it did not write the file, puts the bytes here (``put``)."""

    def __init__(self, wait: Callable[[], bool], put: Callable[[], None]) -> None:
        self._wait, self._put = wait, put
        self._settled = False
        self._error: BaseException | None = None

    def _settle(self) -> None:
        if not self._settled:
            self._settled = True
            try:
                if not self._wait():
                    self._put()
            except BaseException as exc:
                self._error = exc

    def result(self) -> None:
        """Once the artifact is on disk; its put's error otherwise."""
        self._settle()
        if self._error is not None:
            raise self._error

    def exception(self) -> BaseException | None:
        """The put's error, once settled; None when the artifact is on disk."""
        self._settle()
        return self._error


def _failure(future: Future[None] | _PutAfter) -> BaseException | None:
    """The exception ``future`` ended with, once it has ended; None when it succeeded."""
    try:
        return future.exception()
    except CancelledError as exc:
        return exc


@dataclass
class PendingSave:
    """A fitted model ready to store: its id (chosen once), its record with the digest, its
    signed bytes and, in the process that fitted it, the estimator (for the cache)."""

    model_id: str
    record: dict[str, Any]
    data: bytes
    estimator: Any = None
    elsewhere: Callable[[], bool] | None = None
    """The training worker writes the artifact (a local folder's file): call to wait for it,
    True once it is on disk; False: it was not written, so the bytes are put here."""


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
        self._putter = ThreadPoolExecutor(PUT_THREADS, thread_name_prefix="artifact-put")

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

    def prepared_in_memory(self, ref: str) -> Any | None:
        """What ``prepared`` made of ``ref``'s estimator when its id, record, estimator and that
        companion are all in memory, else None.

        Answers without any I/O, so a caller can tell whether a predict would block.
        """
        model_id = self.registry.resolved(ref)
        if model_id is None or model_id not in self._records:
            return None
        return self.cache.cached_companion(model_id)

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
    def save(
        self, estimator: Any, record: dict[str, Any], *, replace_schema: bool = False
    ) -> dict[str, Any]:
        """Store a fitted estimator and its record; assign id and version; return the record.

        A name keeps the model type and feature set of its first model unless ``replace_schema``
        (409 ``NAME_SCHEMA_CONFLICT`` otherwise).
        """
        pending = self.prepare(estimator, record)
        try:
            return self.save_prepared(pending, replace_schema=replace_schema)
        except BaseException as exc:
            if backend_down(exc) is not None:  # save_prepared kept it for a retry: none comes
                self.discard_artifact(pending.model_id)
            raise

    def prepare(
        self,
        estimator: Any,
        record: dict[str, Any],
        *,
        model_id: str | None = None,
        data: bytes | None = None,
        elsewhere: Callable[[], bool] | None = None,
    ) -> PendingSave:
        """A save without I/O yet: the bytes, signed, under a model id chosen now, once.

        ``data``: the estimator's joblib bytes when they were taken already (by the training
        worker), under ``model_id``; ``elsewhere``: the worker writes them to the store itself
        (``PendingSave.elsewhere``), so ``save_prepared`` waits for that instead of a put.
        """
        if data is None:
            buffer = io.BytesIO()
            joblib.dump(estimator, buffer)
            data, elsewhere = buffer.getvalue(), None
        model_id = model_id or new_model_id()
        full = {
            **record,
            "artifact_sha256": self.signer.bound_digest(data, identity(model_id, record)),
            "artifact_digest": self.digest_alg,
            "artifact_bytes": len(data),
        }
        return PendingSave(model_id, full, data, estimator, elsewhere)

    def pending_from(self, model_id: str, record: dict[str, Any], data: bytes) -> PendingSave:
        """A save kept in a job's row, taken up again; refused (409) unless the bytes still carry
        the digest this server signed: a row's bytes are never signed anew."""
        expected = str(record.get("artifact_sha256", ""))
        if record.get("artifact_digest") != BOUND or not self.signer.verify_bound(
            data, identity(model_id, record), expected
        ):
            raise ArtifactRefused(
                f"the kept model {model_id} of this training failed its integrity check"
            )
        return PendingSave(model_id, record, data, None)

    def save_prepared(
        self,
        pending: PendingSave,
        *,
        replace_schema: bool = False,
        then: Callable[[Connection, dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Store ``pending``: its artifact (again: idempotent), then its row; the record.

        ``then(conn, record)`` runs in the row's transaction (a job marking itself done), so the
        row and what ``then`` writes commit together or not at all. On a transient failure
        (``faults.backend_down``) the artifact is left in place for the retry, since the row may
        have been committed before the connection broke; on any other failure it is removed.

        To a local folder the artifact is written (and fsynced) in a thread while the row's
        statements run, and the transaction waits for it before it commits: a row never names
        an artifact that is not on disk, and a failed put rolls the row back and is raised as
        it was. An S3 put comes first, as before (its transaction would otherwise hold the
        database's write lock for as long as the store takes to answer). Bytes the training
        worker writes (``pending.elsewhere``) are waited for at the same point instead, and put
        here only when the worker did not write them.
        """
        model_id, data = pending.model_id, pending.data
        if pending.elsewhere is not None:
            put: Future[None] | _PutAfter = _PutAfter(
                pending.elsewhere, lambda: self._put_after_worker(model_id, data)
            )
        else:
            put = self._put_beside(model_id, data)

        def stored_then(conn: Connection, record: dict[str, Any]) -> None:
            put.result()  # the row commits only once the artifact is on disk
            if then is not None:
                then(conn, record)

        try:
            saved = self.registry.add(
                model_id, pending.record, len(data), replace_schema=replace_schema, then=stored_then
            )
            put.result()  # a row already there (a retry) returns before ``then``
        except BaseException as exc:
            put_failed = _failure(put)
            if put_failed is not None:  # the put's own error, as when it came first
                raise put_failed from None
            if backend_down(exc) is None:
                self.discard_artifact(model_id)
            raise
        if pending.estimator is not None:
            self.cache.put(model_id, pending.estimator, len(data))
        with self._records_lock:  # a record never changes: predicts need not read it back
            self._records[model_id] = {k: v for k, v in saved.items() if k != "aliases"}
        return saved

    def _put_beside(self, model_id: str, data: bytes) -> Future[None]:
        """``_put_once`` started in a thread when the store is a local folder (its fsyncs then
        overlap the row's statements, 1-10 ms each), else done here; its future."""
        if self.artifacts.local:
            return self._putter.submit(self._put_once, model_id, data)
        done: Future[None] = Future()
        try:
            self._put_once(model_id, data)
        except BaseException as exc:
            done.set_exception(exc)
            raise
        done.set_result(None)
        return done

    def _put_after_worker(self, model_id: str, data: bytes) -> None:
        """``_put_once`` of bytes a training worker failed to write or died writing; when its
        file is there whole, its folder's entries are flushed again (it may have died between
        the link and the folder's fsync)."""
        self._put_once(model_id, data)
        slot = self.artifacts.slot(model_id)
        if slot is not None:
            fsync_dir(slot.folder)
            fsync_dir(slot.root)

    def _put_once(self, model_id: str, data: bytes) -> None:
        """Put the artifact; an earlier attempt's identical bytes under the id count as put."""
        try:
            self.artifacts.put(model_id, data)
        except ArtifactExists:
            if not hmac.compare_digest(self.artifacts.get(model_id), data):
                raise
            logger.info("artifact of %s was already stored by an earlier attempt", model_id)

    def discard_artifact(self, model_id: str) -> None:
        """Remove the artifact of a save that was given up (the sweep does it if this fails)."""
        try:
            self.artifacts.delete(model_id)
        except Exception:
            logger.warning("artifact of unsaved model %s not removed", model_id, exc_info=True)

    def has_row(self, model_id: str) -> bool:
        """True when the registry holds a row for ``model_id``."""
        return bool(self.registry.existing([model_id]))

    def prepared(self, model_id: str, make: Callable[[str, dict[str, Any], Any], T]) -> T:
        """``make(model_id, record, estimator)``, made once per loaded estimator and kept with it
        in the model cache (dropped when the estimator is evicted)."""
        estimator = self.load(model_id)
        kept = self.cache.companion(model_id, estimator)
        if kept is None:
            kept = make(model_id, self.model_record(model_id), estimator)
            self.cache.keep_companion(model_id, estimator, kept)
        return kept

    def load(self, model_id: str) -> Any:
        """The fitted estimator of ``model_id``: from the cache, or the store after its check.

        404 ``ARTIFACT_MISSING`` when the row is there but the artifact is not; 409
        ``ARTIFACT_REFUSED`` when the artifact fails its signature (never unpickled then).
        """
        cached = self.cache.get(model_id)
        if cached is not None:
            return cached
        record = self.registry.get_record(model_id)
        try:
            data = self.artifacts.get(model_id)
        except FileNotFoundError:
            logger.error(
                "artifact of model %s is missing from the artifact store",
                model_id,
                extra={"fields": {"model_id": model_id}},
            )
            raise ArtifactMissing(
                f"model {model_id} is registered but its artifact is missing from the artifact "
                "store; it cannot be served (restore the object or train the model again)"
            ) from None
        scheme = record.get("artifact_digest", "sha256")
        expected = str(record.get("artifact_sha256", ""))
        if scheme == BOUND:
            verified = self.signer.verify_bound(data, identity(model_id, record), expected)
        elif scheme == UNBOUND:
            verified = self.signer.verify(data, expected)
        else:
            verified = False
        if not verified:
            self._refuse(model_id, f"failed its {scheme} check")
        estimator = joblib.load(io.BytesIO(data))  # bytes this server signed: safe to unpickle
        if scheme == UNBOUND:
            problem = estimator_mismatch(estimator, record)
            if problem:
                self._refuse(model_id, f"does not match its row: {problem}")
            self._bind(model_id, record, data)
        self.cache.put(model_id, estimator, len(data))
        return estimator

    @staticmethod
    def _refuse(model_id: str, why: str) -> NoReturn:
        logger.error(
            "artifact of model %s %s; refused, not loaded",
            model_id,
            why,
            extra={"fields": {"model_id": model_id}},
        )
        raise ArtifactRefused(
            f"the artifact of model {model_id} failed its integrity check and was not loaded"
        )

    def _bind(self, model_id: str, record: dict[str, Any], data: bytes) -> None:
        """Re-sign a verified v1 row under the bound scheme (a failed write only waits for later)."""
        digest = self.signer.bound_digest(data, identity(model_id, record))
        try:
            self.registry.replace_digest(model_id, digest, BOUND)
        except Exception:
            logger.warning("model %s not re-signed yet", model_id, exc_info=True)
            return
        with self._records_lock:
            self._records.pop(model_id, None)

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
