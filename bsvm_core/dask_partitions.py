"""Row partitions on the workers of a Dask cluster (``distributed``, the ``dask`` extra).

Two ways to hold them, chosen by whoever opens them (``keep``):

* **kept** (``keep=True``): each partition is produced on a worker by a loader task (e.g. reading
  one Parquet row group) and stays there, held by a future; every pass submits ``fn`` next to each
  partition. Because the partitions are tasks, not scattered data, a worker lost mid-fit costs a
  recomputation of its partitions (Dask runs their loaders again), not the fit.
* **streamed** (``keep=False``): nothing stays between passes; every pass submits one task per
  partition that calls its loader and then ``fn``, and keeps only ``fn``'s result. A worker holds
  the partitions it is working on, never the data set, so a data set larger than the cluster's
  memory fits (at the price of reading it once per pass). A lost worker costs its running tasks.

Either way a pass brings back only the results (sums: d, d × d), never the rows. ``on_partition``
(``(done, total)``, called as each partition of a pass finishes) reports a pass as it goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bsvm_core.partitions import Block, sum_results

Loader = Callable[[], Block]
Progress = Callable[[int, int], None]


def _apply(block: Block, fn: Callable[..., Any], p: int, args: tuple[Any, ...]) -> Any:
    X, y = block
    return fn(X, y, p, *args)


def _load_apply(loader: Loader, fn: Callable[..., Any], p: int, args: tuple[Any, ...]) -> Any:
    """``fn`` on the partition ``loader`` reads now; the block is dropped when ``fn`` returns."""
    return _apply(loader(), fn, p, args)


def _shape(block: Block) -> tuple[int, int]:
    X, y = block
    if X.ndim != 2 or len(X) != len(y):
        raise ValueError(f"a partition must be X (n, d) with n labels, got {X.shape}, {y.shape}")
    return int(X.shape[0]), int(X.shape[1])


def _load_shape(loader: Loader) -> tuple[int, int]:
    return _shape(loader())


class DaskPartitions:
    """Partitions on a ``distributed.Client``: futures of blocks (kept) or loaders (streamed);
    ``close()`` releases what the cluster holds."""

    def __init__(
        self,
        client: Any,
        sources: Sequence[Any],
        *,
        keep: bool = True,
        shapes: Sequence[tuple[int, int]] | None = None,
        on_partition: Progress | None = None,
    ) -> None:
        if not sources:
            raise ValueError("at least one partition is needed")
        self.client = client
        self.keep = keep
        self.sources = list(sources)
        self.on_partition = on_partition
        self.n_partitions = len(self.sources)
        if shapes is None:
            shape = _shape if keep else _load_shape
            shapes = self._run([client.submit(shape, s, pure=False) for s in self.sources])
        widths = {d for _, d in shapes}
        if len(widths) != 1:
            raise ValueError(f"partitions disagree on the number of features: {sorted(widths)}")
        self.n_features = widths.pop()
        self.partition_rows = [n for n, _ in shapes]
        self.n_rows = sum(self.partition_rows)
        self.passes = 0

    @property
    def futures(self) -> list[Any]:
        """The futures of the kept partitions (empty when streamed)."""
        return self.sources if self.keep else []

    @classmethod
    def from_loaders(
        cls,
        client: Any,
        loaders: Sequence[Loader],
        *,
        keep: bool = True,
        shapes: Sequence[tuple[int, int]] | None = None,
        on_partition: Progress | None = None,
    ) -> DaskPartitions:
        """Partitions read by ``loader()`` (``(X, y)``) on the workers: one task each, its result
        kept on its worker (``keep``), or read again by every pass. ``shapes`` ((rows, features)
        per partition, when the metadata gives them) spare a pass that waits for every partition:
        kept partitions are then still being read when the first pass is submitted, and each of
        its tasks runs as soon as its partition is in (a reading error surfaces in that pass)."""
        if not keep:
            return cls(client, loaders, keep=False, shapes=shapes, on_partition=on_partition)
        futures = [client.submit(loader, pure=False) for loader in loaders]
        return cls(client, futures, shapes=shapes, on_partition=on_partition)

    @classmethod
    def from_arrays(cls, client: Any, blocks: Sequence[Block]) -> DaskPartitions:
        """Blocks of this process sent to the workers (tests; data already in memory). Not keyed
        by content (``hash=False``): the same blocks sent again right after an earlier set was
        closed would otherwise share the keys being released ("lost dependencies")."""
        blocks = [(np.asarray(X), np.asarray(y)) for X, y in blocks]
        return cls(client, client.scatter(blocks, hash=False))

    def _run(self, futures: list[Any]) -> list[Any]:
        """The futures' results in order, reporting each as it finishes."""
        if self.on_partition is not None:
            from distributed import as_completed

            for done, _ in enumerate(as_completed(futures), start=1):
                self.on_partition(done, len(futures))
        return self.client.gather(futures)

    def map_gather(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """[fn(X_p, y_p, p, *args) for every partition p], each computed on a worker."""
        self.passes += 1
        task = _apply if self.keep else _load_apply
        return self._run(
            [
                self.client.submit(task, source, fn, p, args, pure=False)
                for p, source in enumerate(self.sources)
            ]
        )

    def map_sum(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Σ_p fn(X_p, y_p, p, *args): only the per-partition results cross the network."""
        return sum_results(self.map_gather(fn, *args))

    def close(self) -> None:
        """Let the cluster drop the kept partitions."""
        for future in self.futures:
            future.release()
        self.sources = []

    def __enter__(self) -> DaskPartitions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
