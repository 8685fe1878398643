"""Write-once files in a local folder, durable before they are named: the artifact store's folder
layout (``<root>/<model id>/model.joblib``) with nothing but ``os``.

``ArtifactStore`` writes a folder's artifacts with ``write_once``; so does a training worker that
is handed a ``LocalArtifact`` (``training/worker.py``: it writes the model it fitted while it
evaluates it, so the server's save no longer waits on these flushes). This module imports no
more than the standard library, so the training forkserver preloads it for nothing.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

ARTIFACT = "model.joblib"
TMP_PREFIX = ".tmp-"


def fsync_dir(path: str) -> None:
    """Flush a directory entry (a new name) to disk where the OS allows it."""
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


def _in_thread(fn: Callable[[str], None], arg: str) -> threading.Thread:
    """``fn(arg)`` started in a thread of its own (join it)."""
    thread = threading.Thread(target=fn, args=(arg,), name="artifact-fsync", daemon=True)
    thread.start()
    return thread


def write_once(root: str, folder: str, path: str, data: bytes) -> None:
    """Temporary file, fsync, no-replace rename (hard link) into place, fsync the folder;
    ``FileExistsError`` when ``path`` exists already.

    When ``folder`` (under ``root``) is created here, the root's fsync (its new entry) runs in a
    thread meanwhile, beside the file's and the folder's: flushes issued together cost about one
    (on a shared disk, 1-4 ms each when issued one after the other). The order that matters
    stays: the bytes are on disk before the link that names them, and every entry is on disk
    before this returns. A crash leaves at most a temporary file (``TMP_PREFIX``).
    """
    if os.path.exists(path):
        raise FileExistsError(path)
    try:
        os.mkdir(folder)
        created = True
    except FileExistsError:
        created = False
    tmp = f"{folder}/{TMP_PREFIX}{uuid.uuid4().hex}"
    root_synced: threading.Thread | None = None
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
            fh.flush()
            if created:
                root_synced = _in_thread(fsync_dir, root)
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError:  # a filesystem without hard links: check, then a plain rename
            if os.path.exists(path):
                raise FileExistsError(path) from None
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(folder)
    if root_synced is not None:
        root_synced.join()


@dataclass(frozen=True)
class LocalArtifact:
    """Where one model's artifact goes in a local artifact folder: ``root`` and the model id
    (chosen by the server before the fit; well formed, see ``artifacts.check_model_id``)."""

    root: str
    model_id: str

    @property
    def folder(self) -> str:
        """The model's folder."""
        return f"{self.root}/{self.model_id}"

    @property
    def path(self) -> str:
        """The artifact's file."""
        return f"{self.folder}/{ARTIFACT}"

    def write(self, data: bytes) -> None:
        """``write_once`` the bytes there (``FileExistsError`` when they are there already)."""
        write_once(self.root, self.folder, self.path, data)
