"""Write-once output folders: one file per input partition, complete or not at all.

The commit protocol is Hadoop's and Spark's (``FileOutputCommitter``), which object stores
without a rename can follow too:

1. Each partition is written, as one file, under the output prefix's staging folder
   ``<prefix>_temporary/<attempt>/`` (``attempt`` = job id and a fresh token, so a job run again
   after a crash never meets the files of its earlier attempt). Names starting with ``_`` are
   skipped by every reader of folders (Spark, Hive, pyarrow datasets, Dask, and
   ``service.data.sources``), so staged files are never read as output.
2. ``commit``: when every partition is staged, each file is moved to ``<prefix>part-NNNNN.<ext>``
   (a rename on a local disk; copy and delete on S3), then ``<prefix>_SUCCESS`` is written
   **last**, holding the manifest (files, rows, model, job). A failure while moving removes the
   files already moved, so the prefix holds nothing again.
3. ``discard``: a failed or cancelled job removes its staging folder.

**Readers must wait for ``_SUCCESS``** and read the files its manifest lists: an output is
complete if and only if ``_SUCCESS`` exists; a process killed in the middle of step 2 (moves are
not atomic together on S3) can leave part files without ``_SUCCESS``, never the other way round.
A prefix that already holds ``_SUCCESS`` or any file outside ``_temporary/`` is refused (409),
before the job is queued and again at its commit: an output is never overwritten.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from service.data.sources import open_filesystem
from service.errors import Conflict, detail

logger = logging.getLogger("service.data.writing")

SUCCESS = "_SUCCESS"
"""The marker written last: the output is complete once it exists; it holds the manifest."""
STAGING = "_temporary"
"""The folder under the output prefix where partitions are written before the commit."""
EXTENSIONS = {"parquet": "parquet", "csv": "csv"}


def part_name(index: int, data_format: str) -> str:
    """The output file of input partition ``index``: ``part-00000.parquet``."""
    return f"part-{index:05d}.{EXTENSIONS[data_format]}"


@dataclass(frozen=True)
class OutputFolder:
    """An output prefix: ``path`` (fsspec, ending in ``/``) on ``scheme`` with ``options``."""

    scheme: str
    path: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The prefix as a URI."""
        return f"{self.scheme}://{self.path}"

    def filesystem(self) -> Any:
        """An fsspec filesystem for the prefix (the server's options, no credentials)."""
        return open_filesystem(self.scheme, self.options)

    def staging(self, attempt: str) -> str:
        """The staging folder of one attempt: ``<prefix>_temporary/<attempt>/``."""
        return f"{self.path}{STAGING}/{attempt}/"

    def check_free(self, field_name: str = "output.uri") -> None:
        """409 naming ``field_name`` when the prefix holds a complete output or any other file
        than staged ones (an output is never overwritten, nor mixed with foreign files)."""
        fs = self.filesystem()
        if fs.exists(self.path + SUCCESS):
            raise Conflict(
                "the output already exists",
                [
                    detail(
                        field_name,
                        f"{self.url} holds a complete output ({SUCCESS}); choose another prefix",
                    )
                ],
            )
        found = [p for p in _files_under(fs, self.path) if not _staged(self.path, p)]
        if found:
            raise Conflict(
                "the output prefix is not empty",
                [
                    detail(
                        field_name,
                        f"{self.url} already holds {len(found)} files (e.g. "
                        f"{posixpath.basename(found[0])}); choose an empty prefix",
                    )
                ],
            )

    def commit(self, attempt: str, names: Sequence[str], manifest: dict[str, Any]) -> list[str]:
        """Move the staged ``names`` to the prefix, then write ``_SUCCESS`` last; the final URIs.

        409 when the prefix was taken meanwhile; on any failure the moved files are removed
        again (and the staging folder is left for ``discard``).
        """
        self.check_free()
        fs = self.filesystem()
        staging = self.staging(attempt)
        moved: list[str] = []
        try:
            for name in names:
                fs.mv(staging + name, self.path + name)
                moved.append(self.path + name)
            with fs.open(self.path + SUCCESS, "wb") as fh:
                fh.write(json.dumps(manifest, indent=1).encode())
        except BaseException:
            for path in moved:
                _quietly(fs.rm, path)
            raise
        _remove_staging(fs, self.path, staging)
        return [f"{self.scheme}://{path}" for path in moved]

    def discard(self, attempt: str) -> None:
        """Remove one attempt's staging folder (and ``_temporary/`` when it is left empty)."""
        fs = self.filesystem()
        _remove_staging(fs, self.path, self.staging(attempt))


def _staged(prefix: str, path: str) -> bool:
    return path[len(prefix) :].lstrip("/").startswith(STAGING + "/")


def _files_under(fs: Any, prefix: str) -> list[str]:
    try:
        return sorted(fs.find(prefix))
    except FileNotFoundError:
        return []


def _quietly(call: Any, *args: Any, **kwargs: Any) -> None:
    try:
        call(*args, **kwargs)
    except FileNotFoundError:
        pass
    except Exception:
        logger.warning("could not remove %s", args[0] if args else "", exc_info=True)


def _remove_staging(fs: Any, prefix: str, staging: str) -> None:
    """Remove ``staging`` and, if then empty, ``<prefix>_temporary/`` (local folders only)."""
    if fs.exists(staging):
        _quietly(fs.rm, staging, recursive=True)
    top = prefix + STAGING
    if fs.exists(top) and not fs.find(top):
        _quietly(fs.rm, top, recursive=True)
