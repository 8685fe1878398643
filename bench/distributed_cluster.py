"""``bench_distributed``'s Dask ``LocalCluster`` and the peak RSS of the server, the workers and
the job's driver."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.server import peak_rss_mb, process_tree, reset_peak_rss


# -- cluster, server and their memory ------------------------------------------------------------
@contextlib.contextmanager
def local_cluster() -> Iterator[Any]:
    """A 2-worker, 1-thread-each process ``LocalCluster`` and a client of it.

    Workers are not daemonic: each training's driver is a subprocess of a worker
    (``service.training.executors``).
    """
    import dask
    import distributed

    with (
        dask.config.set({"distributed.worker.daemon": False}),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            memory_limit="8GiB",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield cluster, client


def children(pid: int) -> list[int]:
    """The direct children of ``pid``."""
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            out.extend(int(child) for child in task.read_text().split())
    return out


class PeakWatch:
    """Peak RSS (``VmHWM``) of the server, the Dask workers and the job's driver.

    ``VmHWM`` of the long-lived processes is reset at ``start`` (``clear_refs``); a thread samples
    the short-lived fit processes (the driver: a child of a worker's training forkserver) every
    0.1 s until ``stop``.
    """

    def __init__(self, server_pid: int, worker_pids: Sequence[int]) -> None:
        self.server_pid, self.worker_pids = server_pid, list(worker_pids)
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.descendants: dict[int, float] = {}

    def start(self) -> PeakWatch:
        for pid in [self.server_pid, *self.worker_pids]:
            reset_peak_rss(pid)
        self.descendants = {}
        self._done.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while True:
            for worker in self.worker_pids:
                # the worker's children are its training forkserver and resource tracker; the
                # fits are the forkserver's children
                for child in children(worker):
                    for pid in process_tree(child)[1:]:
                        peak = peak_rss_mb(pid)
                        self.descendants[pid] = max(self.descendants.get(pid, 0.0), peak)
            if self._done.wait(0.1):
                return

    def stop(self) -> dict[str, Any]:
        """{"server": MB, "driver": MB, "workers": [MB, MB]} since ``start``."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        return {
            "server": peak_rss_mb(self.server_pid),
            "driver": max(self.descendants.values(), default=0.0),
            "workers": [peak_rss_mb(pid) for pid in self.worker_pids],
        }
