"""Row partitions of a data source by reference (``bsvm_core.partitions.RowPartitions``).

``StreamedPartitions`` reads the partitions in this process, one at a time, on every pass: the
process holds one partition (a Parquet row group or a CSV file), never the data set.
``open_partitions`` gives it, or, with a ``distributed.Client``, ``DaskPartitions`` read by the
cluster's workers, which either keep them between passes or read them again on every pass:

* **kept** when the data set (rows × (features + 1) × 8 bytes, from the metadata's row counts) is
  at most ``KEEP_SHARE`` of the cluster's memory (the sum of its workers' ``memory_limit``; a
  worker without a limit counts as room enough). Dask starts spilling a worker's data to disk at
  60 % of its limit (``distributed.worker.memory.target``); half leaves room for the passes' own
  arrays and for the workers' unequal shares, so kept partitions stay in memory.
* **streamed per pass** otherwise (and when a row count is unknown): each pass's task reads its
  partition, applies the pass and drops it, so a worker holds the partitions it is working on
  (one per thread), never the data set, whatever its size; the price is a read of the data set
  per pass instead of one. Dask's pause and terminate thresholds stay as configured.

Every pass reports its partitions as they finish (``on_partition``), which the job's progress
shows (``service.training.reference_progress``).

``ScaledPartitions`` standardises every block where it is (on the worker that holds it) before
the fit's function sees it: the mean and scale come from two passes of sums (``fit_scaler``), and
the returned ``StandardScaler`` is the one the stored pipeline applies at predict time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sklearn.preprocessing import StandardScaler

from bsvm_core.partitions import RowPartitions, sum_results
from service.data.loading import PartLoader

Progress = Callable[[int, int], None]
"""Called with (partitions read in this pass, partitions in all)."""

KEEP_SHARE = 0.5
"""Dask partitions are kept on the workers when the data set is at most this share of the
cluster's memory, and streamed per pass otherwise (see the module notes)."""


class StreamedPartitions:
    """The partitions of ``loaders`` read one at a time in this process, pass after pass."""

    def __init__(self, loaders: Sequence[PartLoader], on_partition: Progress | None = None) -> None:
        if not loaders:
            raise ValueError("at least one partition is needed")
        self.loaders = list(loaders)
        self.on_partition = on_partition
        self.n_partitions = len(self.loaders)
        self.n_features = len(self.loaders[0].features)
        self.passes = 0
        counts = [loader.rows for loader in self.loaders]
        if any(c is None for c in counts):
            counts = self.map_gather(_rows)
        self.partition_rows = [int(c) for c in counts if c is not None]
        self.n_rows = sum(self.partition_rows)

    def map_gather(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """[fn(X_p, y_p, p, *args) for every partition p]; each partition read, used, dropped."""
        self.passes += 1
        results = []
        for p, loader in enumerate(self.loaders):
            X, y = loader()
            results.append(fn(X, y, p, *args))
            del X, y
            if self.on_partition is not None:
                self.on_partition(p + 1, self.n_partitions)
        return results

    def map_sum(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Σ_p fn(X_p, y_p, p, *args)."""
        return sum_results(self.map_gather(fn, *args))

    def close(self) -> None:
        """Nothing held between passes."""


def _rows(X: np.ndarray, y: np.ndarray, p: int) -> int:
    return int(X.shape[0])


def _scaled(
    X: np.ndarray,
    y: np.ndarray,
    p: int,
    fn: Callable[..., Any],
    mean: np.ndarray,
    scale: np.ndarray,
    *args: Any,
) -> Any:
    """``fn`` on the standardised block (a new array: the partition is left as it is)."""
    return fn((X - mean) / scale, y, p, *args)


class ScaledPartitions:
    """``inner``'s partitions standardised by ``(X - mean) / scale`` where they live."""

    def __init__(self, inner: RowPartitions, mean: np.ndarray, scale: np.ndarray) -> None:
        self.inner = inner
        self.mean = np.asarray(mean, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.n_features = inner.n_features
        self.n_rows = inner.n_rows
        self.n_partitions = inner.n_partitions

    def map_gather(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """[fn(standardised X_p, y_p, p, *args) for every partition p]."""
        return self.inner.map_gather(_scaled, fn, self.mean, self.scale, *args)

    def map_sum(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Σ_p fn(standardised X_p, y_p, p, *args)."""
        return self.inner.map_sum(_scaled, fn, self.mean, self.scale, *args)


def _sums(X: np.ndarray, y: np.ndarray, p: int) -> tuple[int, np.ndarray]:
    return int(X.shape[0]), X.sum(axis=0)


def _squares(X: np.ndarray, y: np.ndarray, p: int, mean: np.ndarray) -> np.ndarray:
    centred = X - mean
    return np.einsum("ij,ij->j", centred, centred)


def fit_scaler(parts: RowPartitions) -> StandardScaler:
    """A ``StandardScaler`` fitted by two passes of sums: the mean, then Σ (x − mean)².

    The same attributes ``StandardScaler.fit`` sets (population variance; a zero scale is 1).
    """
    n, total = parts.map_sum(_sums)
    mean = total / n
    var = parts.map_sum(_squares, mean) / n
    scaler = StandardScaler()
    scale = np.sqrt(var)
    scale[scale < 10 * np.finfo(np.float64).eps * np.maximum(np.abs(mean), 1.0)] = 1.0
    scaler.mean_, scaler.var_, scaler.scale_ = mean, var, scale
    scaler.n_features_in_ = parts.n_features
    scaler.n_samples_seen_ = np.int64(n)
    return scaler


def _stats(X: np.ndarray, y: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return X.sum(axis=0), X.min(axis=0), X.max(axis=0)


def feature_stats(parts: RowPartitions) -> dict[str, list[float]]:
    """Column means, minima and maxima in one pass (``service.plots.data.feature_stats``)."""
    results = parts.map_gather(_stats)
    total = np.sum([r[0] for r in results], axis=0)
    return {
        "mean": (total / parts.n_rows).tolist(),
        "min": np.min([r[1] for r in results], axis=0).tolist(),
        "max": np.max([r[2] for r in results], axis=0).tolist(),
    }


def data_bytes(loaders: Sequence[PartLoader]) -> int | None:
    """The data set's size as float64 blocks (features and label); None when a count is unknown."""
    if any(loader.rows is None for loader in loaders):
        return None
    return sum(int(loader.rows or 0) * (len(loader.features) + 1) * 8 for loader in loaders)


def cluster_memory(client: Any) -> int | None:
    """The sum of the cluster's workers' ``memory_limit``; None when one has none (or none is
    known yet)."""
    workers = client.scheduler_info().get("workers", {})
    limits = [int(w.get("memory_limit") or 0) for w in workers.values()]
    if not limits or 0 in limits:
        return None
    return sum(limits)


def keeps(client: Any, loaders: Sequence[PartLoader]) -> bool:
    """Whether Dask partitions are kept on the workers (else streamed per pass)."""
    memory = cluster_memory(client)
    if memory is None:
        return True
    size = data_bytes(loaders)
    return size is not None and size <= KEEP_SHARE * memory


def open_partitions(
    loaders: Sequence[PartLoader], client: Any = None, on_partition: Progress | None = None
) -> Any:
    """``DaskPartitions`` on the cluster of ``client`` (kept or streamed per pass: ``keeps``),
    else ``StreamedPartitions``; ``on_partition`` hears of every partition of every pass."""
    if client is not None:
        from bsvm_core.dask_partitions import DaskPartitions

        known = data_bytes(loaders) is not None
        shapes = [(int(p.rows or 0), len(p.features)) for p in loaders] if known else None
        return DaskPartitions.from_loaders(
            client, loaders, keep=keeps(client, loaders), shapes=shapes, on_partition=on_partition
        )
    return StreamedPartitions(loaders, on_partition)
