"""Row partitions kept on the workers of a Dask cluster (``distributed``, the ``dask`` extra).

Each partition is produced on a worker by a loader task (e.g. reading one Parquet file) and stays
there, held by a future; every pass of a fit submits ``fn`` next to each partition and brings back
only its result (sums: d, d × d), never the rows. Because the partitions are tasks, not scattered
data, a worker lost mid-fit costs a recomputation of its partitions, not the fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bsvm_core.partitions import Block, sum_results


def _apply(block: Block, fn: Callable[..., Any], p: int, args: tuple[Any, ...]) -> Any:
    X, y = block
    return fn(X, y, p, *args)


def _shape(block: Block) -> tuple[int, int]:
    X, y = block
    if X.ndim != 2 or len(X) != len(y):
        raise ValueError(f"a partition must be X (n, d) with n labels, got {X.shape}, {y.shape}")
    return int(X.shape[0]), int(X.shape[1])


class DaskPartitions:
    """Partitions as futures on a ``distributed.Client``; ``close()`` releases them."""

    def __init__(self, client: Any, futures: Sequence[Any]) -> None:
        if not futures:
            raise ValueError("at least one partition is needed")
        self.client = client
        self.futures = list(futures)
        shapes = client.gather(client.map(_shape, self.futures, pure=False))
        widths = {d for _, d in shapes}
        if len(widths) != 1:
            raise ValueError(f"partitions disagree on the number of features: {sorted(widths)}")
        self.n_features = widths.pop()
        self.partition_rows = [n for n, _ in shapes]
        self.n_rows = sum(self.partition_rows)
        self.n_partitions = len(self.futures)
        self.passes = 0

    @classmethod
    def from_loaders(cls, client: Any, loaders: Sequence[Callable[[], Block]]) -> DaskPartitions:
        """One task per loader (``loader()`` returns ``(X, y)``), its result kept on its worker."""
        return cls(client, [client.submit(loader, pure=False) for loader in loaders])

    @classmethod
    def from_arrays(cls, client: Any, blocks: Sequence[Block]) -> DaskPartitions:
        """Blocks of this process sent to the workers (tests; data already in memory)."""
        return cls(client, client.scatter([(np.asarray(X), np.asarray(y)) for X, y in blocks]))

    def map_gather(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """[fn(X_p, y_p, p, *args) for every partition p], each computed where p lives."""
        self.passes += 1
        futures = [
            self.client.submit(_apply, block, fn, p, args, pure=False)
            for p, block in enumerate(self.futures)
        ]
        return self.client.gather(futures)

    def map_sum(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Σ_p fn(X_p, y_p, p, *args): only the per-partition results cross the network."""
        return sum_results(self.map_gather(fn, *args))

    def close(self) -> None:
        """Let the cluster drop the partitions."""
        for future in self.futures:
            future.release()
        self.futures = []

    def __enter__(self) -> DaskPartitions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
