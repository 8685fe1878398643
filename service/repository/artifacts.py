"""Model artifacts (the joblib bytes) on a local folder or an S3 bucket, through fsspec.

Layout, the same as the model folders of the single-node store, so existing folders need no
copying::

    <root>/m_<32 hex>/model.joblib

``root`` comes from a URL: ``file:///abs/path`` (a local or shared volume) or
``s3://bucket/prefix`` (s3fs; ``endpoint_url`` for MinIO or moto; credentials from the usual
``AWS_*`` environment variables). Artifacts are write-once under their model id:

* file: the bytes go to ``.tmp-<hex>`` in the model's folder, are fsynced (and, at the same time,
  the root that holds the new folder), and are hard-linked to ``model.joblib`` (a rename that
  refuses to replace; a plain rename where links are not supported), then the folder is
  fsynced (``local_files.write_once``). A crash leaves at most a temporary file: the name never
  reaches the disk before the bytes do. A training worker may write a model's file itself, the
  same way, where ``slot`` tells it to (it then does so while it evaluates the model).
* s3: one PUT with ``If-None-Match: *`` (atomic, exclusive object creation; needs an S3 that
  honours conditional writes: AWS, moto, recent MinIO; s3fs >= 2025.7). Objects over 100 MB
  go multipart, completed under the same condition.

Every call on an S3 store is bounded by ``timeout_s`` (``BSVM_STORE_TIMEOUT_S``, through fsspec's
own timeout, which cancels the request, with botocore's connect and read timeouts under it; a
folder's calls are the operating system's). A store that refuses, fails or does not answer in time
raises ``StoreUnavailable`` (503 with
``Retry-After``), never the transport's error; a missing artifact is still ``FileNotFoundError``
and an existing one ``ArtifactExists``. ``outage`` logs when an outage starts and ends.

The registry row and the artifact are two stores, so a replica saves the artifact first and
commits the row after, and deletes the row first and the artifact after; a crash in between
leaves an artifact without a row, which :meth:`ArtifactStore.sweep` removes once it is older than
a grace period longer than any save in flight.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import fsspec
from fsspec.exceptions import FSTimeoutError

from service.errors import StoreUnavailable
from service.repository.faults import Outage
from service.repository.local_files import (
    ARTIFACT,
    TMP_PREFIX,
    LocalArtifact,
    fsync_dir,
    write_once,
)

logger = logging.getLogger("service.repository.artifacts")

#: A folder still holding this file belongs to the pre-database layout; the sweep leaves it alone.
LEGACY_RECORD = "record.json"
_ID_RE = re.compile(r"^m_[0-9a-f]{32}$")
_ROW_BATCH = 500
S3_CONNECT_TIMEOUT_S = 5.0
STORE_TIMEOUT_S = 30.0
"""The default bound of one store call (``BSVM_STORE_TIMEOUT_S``)."""
SET_UP_S = 10.0
"""The bound of ``warm_up``: an S3 store's first call also builds its client (TLS context,
credentials), 1.5 s and more on a busy machine, none of it a wait on the store."""

HasRows = Callable[[list[str]], set[str]]


class ArtifactExists(FileExistsError):
    """An artifact is already stored under this model id (artifacts are write-once)."""


def check_model_id(model_id: str) -> str:
    """Return ``model_id`` or raise ValueError unless it is ``m_`` and 32 lowercase hex digits."""
    if not isinstance(model_id, str) or not _ID_RE.fullmatch(model_id):
        raise ValueError(f"not a model id: {model_id!r}")
    return model_id


def local_url(path: Path | str) -> str:
    """The ``file://`` URL of a local folder (absolute, not percent-encoded, as fsspec wants)."""
    return "file://" + str(Path(path).resolve())


def _mtime(info: dict[str, Any]) -> float | None:
    """Modification time (epoch seconds) from an fsspec info dict; None when it has none."""
    value = info.get("mtime", info.get("LastModified"))
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return None


class ArtifactStore:
    """Write-once model artifacts under ``<root>/<model_id>/model.joblib`` on file:// or s3://.

    Parameters
    ----------
    url : str
        ``file:///abs/path`` or ``s3://bucket/prefix``.
    endpoint_url : str or None
        S3 endpoint (MinIO, moto); None for AWS. Ignored for file://.
    timeout_s : float
        Longest wait on one call (see the module docstring).
    """

    def __init__(
        self, url: str, *, endpoint_url: str | None = None, timeout_s: float = STORE_TIMEOUT_S
    ) -> None:
        self.timeout_s = timeout_s
        self.outage = Outage("store")
        protocol, _, rest = url.partition("://")
        if protocol == "file":
            if not rest.startswith("/"):
                raise ValueError(f"file URL must hold an absolute path: {url!r}")
            self.fs = fsspec.filesystem("file")
            self.root = os.path.normpath(rest)
            self.local = True
            os.makedirs(self.root, exist_ok=True)
        elif protocol == "s3":
            self.root = rest.strip("/")
            if not self.root:
                raise ValueError(f"s3 URL must name a bucket: {url!r}")
            self.fs = fsspec.filesystem(
                "s3",
                endpoint_url=endpoint_url,
                use_listings_cache=False,  # other replicas write too: never trust a listing
                skip_instance_cache=True,
                config_kwargs={
                    "connect_timeout": min(S3_CONNECT_TIMEOUT_S, timeout_s),
                    "read_timeout": timeout_s,
                    "retries": {"max_attempts": 3},
                },
            )
            self.local = False
        else:
            raise ValueError(f"artifact URL must be file:// or s3://, not {url!r}")
        self.url = url

    # -- every call -----------------------------------------------------------------------------
    def _call(self, method: str, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        """``self.fs.<method>(*args, **kwargs)`` within ``timeout_s`` (default ``self.timeout_s``);
        ``StoreUnavailable`` when the store fails or does not answer, ``FileNotFoundError`` and
        ``FileExistsError`` as they come."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        if not self.local:
            kwargs["timeout"] = timeout  # fsspec's sync(): cancels the call on the store's loop
        try:
            result = getattr(self.fs, method)(*args, **kwargs)
        except (FileNotFoundError, FileExistsError):
            self.outage.answered()
            raise
        except (FSTimeoutError, TimeoutError) as exc:
            self.outage.failed(exc)
            raise StoreUnavailable(
                f"the artifact store did not answer within {timeout:g} s (BSVM_STORE_TIMEOUT_S); "
                "retry shortly"
            ) from exc
        except Exception as exc:  # refused, reset, 5xx, denied: the store is not usable now
            self.outage.failed(exc)
            raise StoreUnavailable("the artifact store is not answering; retry shortly") from exc
        self.outage.answered()
        return result

    def warm_up(self) -> bool:
        """Build the S3 client and reach the store once, within ``SET_UP_S`` (at start, before
        any request: loading CA certificates is no wait on the store); True when it answered."""
        if self.local:
            return True
        try:
            self._call("exists", self.root, timeout_s=max(self.timeout_s, SET_UP_S))
        except StoreUnavailable:
            return False
        return True

    # -- keys ----------------------------------------------------------------------------------
    def _folder(self, model_id: str) -> str:
        """The folder (prefix) of ``model_id``; only well-formed ids, so never outside the root."""
        return f"{self.root}/{check_model_id(model_id)}"

    def _path(self, model_id: str) -> str:
        """The artifact key of ``model_id``."""
        return f"{self._folder(model_id)}/{ARTIFACT}"

    # -- reads ---------------------------------------------------------------------------------
    def get(self, model_id: str) -> bytes:
        """The artifact bytes of ``model_id``; FileNotFoundError when absent."""
        return self._call("cat_file", self._path(model_id))

    def exists(self, model_id: str) -> bool:
        """True when an artifact is stored under ``model_id``."""
        return bool(self._call("isfile", self._path(model_id)))

    def size(self, model_id: str) -> int:
        """Byte length of the artifact of ``model_id``; FileNotFoundError when absent."""
        return int(self._call("size", self._path(model_id)))

    def is_usable(self, timeout_s: float | None = None) -> bool:
        """True when the root is reachable and writable (for s3: the bucket answers within
        ``timeout_s`` and within ``self.timeout_s``, the bound of every store call)."""
        if self.local:
            return os.path.isdir(self.root) and os.access(self.root, os.W_OK | os.X_OK)
        bucket = self.root.split("/", 1)[0]
        bound = self.timeout_s if timeout_s is None else min(timeout_s, self.timeout_s)
        try:
            self._call("info", bucket, timeout_s=bound)
        except StoreUnavailable:  # ``outage`` has logged it
            return False
        except FileNotFoundError:
            logger.warning("artifact bucket %s does not exist", bucket)
            return False
        return True

    # -- writes --------------------------------------------------------------------------------
    def put(self, model_id: str, data: bytes) -> None:
        """Store ``data`` under ``model_id`` atomically; ArtifactExists if it is already stored."""
        path = self._path(model_id)
        if self.local:
            try:
                self._put_local(model_id, path, data)
            except FileExistsError:
                raise
            except OSError as exc:  # a full disk, a read-only or vanished volume
                self.outage.failed(exc)
                raise StoreUnavailable(
                    "the artifact folder cannot be written; retry later"
                ) from exc
            self.outage.answered()
            return
        try:
            self._call("pipe_file", path, data, mode="create")  # the PUT carries If-None-Match: *
        except FileExistsError as exc:
            raise ArtifactExists(f"artifact of {model_id} already stored") from exc

    def _put_local(self, model_id: str, path: str, data: bytes) -> None:
        """``local_files.write_once``: temporary file, fsync, no-replace rename (hard link) into
        place, fsync the folder (and the root, when the folder is new)."""
        try:
            write_once(self.root, self._folder(model_id), path, data)
        except FileExistsError as exc:
            raise ArtifactExists(f"artifact of {model_id} already stored") from exc

    def slot(self, model_id: str) -> LocalArtifact | None:
        """Where a training worker may write ``model_id``'s artifact itself (``write_once``, the
        same file as ``put``'s); None when the store is not a local folder."""
        return LocalArtifact(self.root, check_model_id(model_id)) if self.local else None

    def delete(self, model_id: str) -> None:
        """Remove the artifact (and the folder) of ``model_id``; nothing happens when absent."""
        folder = self._folder(model_id)
        targets = [(self._path(model_id), False)] if self.local else []
        for target, recursive in [*targets, (folder, True)]:  # local: the artifact goes first
            with contextlib.suppress(FileNotFoundError):
                self._call("rm", target, recursive=recursive)
        if self.local:
            fsync_dir(self.root)

    # -- crash leftovers -----------------------------------------------------------------------
    def sweep(self, has_rows: HasRows, grace_s: float, *, now: float | None = None) -> list[str]:
        """Remove temporary files and row-less artifacts older than ``grace_s``; return their paths.

        ``has_rows(ids)`` answers which of ``ids`` have a registry row. Only files at
        ``<root>/<model id>/`` are considered; anything else under the root is left alone, and
        so is a folder that still holds a legacy ``record.json``. ``now`` (epoch seconds)
        defaults to the current time.
        """
        now = time.time() if now is None else now
        folders: dict[str, dict[str, dict[str, Any]]] = {}
        for full, info in self._walk():
            if not full.startswith(self.root + "/"):
                continue
            rel = full[len(self.root) + 1 :].split("/")
            if len(rel) == 2 and _ID_RE.fullmatch(rel[0]):
                folders.setdefault(rel[0], {})[rel[1]] = info

        def old(info: dict[str, Any]) -> bool:
            mtime = _mtime(info)
            return mtime is not None and now - mtime > grace_s

        removed: list[str] = []
        candidates: list[str] = []
        for model_id, files in folders.items():
            if LEGACY_RECORD in files:
                continue
            for name, info in files.items():
                if name.startswith(TMP_PREFIX) and old(info):
                    removed += self._remove(f"{self._folder(model_id)}/{name}")
            if ARTIFACT in files and old(files[ARTIFACT]):
                candidates.append(model_id)
        with_rows: set[str] = set()
        for start in range(0, len(candidates), _ROW_BATCH):
            with_rows |= set(has_rows(candidates[start : start + _ROW_BATCH]))
        for model_id in candidates:
            if model_id not in with_rows:
                removed += self._remove(self._path(model_id))
        self._drop_empty_folders({p.rsplit("/", 1)[0] for p in removed})
        for path in removed:
            logger.warning("sweep removed crash leftover %s", path, extra={"path": path})
        return removed

    def _walk(self) -> Iterable[tuple[str, dict[str, Any]]]:
        """(path, info) of every file under the root; [] when the root does not exist yet."""
        try:
            found = self._call("find", self.root, withdirs=False, detail=True)
        except FileNotFoundError:
            return []
        return [(path.rstrip("/"), info) for path, info in found.items()]

    def _remove(self, path: str) -> list[str]:
        """Delete one file; ``[path]`` when it was removed, ``[]`` when it was already gone."""
        try:
            self._call("rm_file", path)
        except FileNotFoundError:
            return []
        return [path]

    def _drop_empty_folders(self, folders: Iterable[str]) -> None:
        """Remove the given local folders when empty (s3 has no folders to remove)."""
        if not self.local:
            return
        for folder in folders:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
