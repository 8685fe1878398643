"""Row partitions: a data set held as blocks of rows, for the fits that are sums over rows.

A fit that is a sum over rows (the LDA/QDA counts, sums and scatter matrices; the exact linear
SVM's Newton sums; the Polson-Scott EM/ECME sums X'Λ⁻¹X and X'(y ∘ (1 + λ⁻¹)); a Gibbs sweep) asks
its data for sums and never for the rows. The same solver code then runs on one array in memory
(``ArrayPartitions``), on files streamed block by block, or on partitions kept on the workers of a
Dask cluster (``bsvm_core.dask_partitions``): each pass moves only the model and the sums.

``fn`` given to ``map_sum``/``map_gather`` is called as ``fn(X_p, y_p, p, *args)`` with ``X_p`` a
float64 C-ordered ``(n_p, d)`` block, ``y_p`` its labels (as read: not yet encoded), ``p`` the
partition's index (so random streams can be derived per partition); it must be a module-level
function (it is pickled to Dask workers) and must not modify the block.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

Block = tuple[np.ndarray, np.ndarray]
"""One partition: ``X`` (float64, ``(n_p, d)``) and ``y`` (``(n_p,)``, labels as read)."""


@runtime_checkable
class RowPartitions(Protocol):
    """A data set as row blocks that can be mapped and summed over, pass after pass."""

    n_features: int
    n_rows: int
    n_partitions: int

    def map_sum(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Σ_p fn(X_p, y_p, p, *args): arrays, numbers, or tuples/lists of them, elementwise."""
        ...

    def map_gather(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """[fn(X_p, y_p, p, *args) for every partition p], in partition order."""
        ...


def add_results(a: Any, b: Any) -> Any:
    """Elementwise sum of two ``fn`` results (arrays, numbers, or tuples/lists of them)."""
    if isinstance(a, tuple | list):
        return type(a)(add_results(x, y) for x, y in zip(a, b, strict=True))
    if a is None:
        return None
    return a + b


def sum_results(results: Sequence[Any]) -> Any:
    """Sum of a non-empty sequence of ``fn`` results, pairwise (a balanced tree keeps rounding low)."""
    if not results:
        raise ValueError("no partitions to sum")
    items = list(results)
    while len(items) > 1:
        paired = [add_results(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            paired.append(items[-1])
        items = paired
    return items[0]


class ArrayPartitions:
    """Partitions of arrays held in this process: the reference, and the in-memory case."""

    def __init__(self, blocks: Sequence[Block]) -> None:
        if not blocks:
            raise ValueError("at least one partition is needed")
        self.blocks = [
            (np.ascontiguousarray(X, dtype=np.float64), np.asarray(y)) for X, y in blocks
        ]
        widths = {X.shape[1] for X, _ in self.blocks}
        if len(widths) != 1:
            raise ValueError(f"partitions disagree on the number of features: {sorted(widths)}")
        self.n_features = widths.pop()
        self.n_rows = sum(X.shape[0] for X, _ in self.blocks)
        self.n_partitions = len(self.blocks)

    @classmethod
    def split(cls, X: np.ndarray, y: np.ndarray, n_partitions: int) -> ArrayPartitions:
        """``X, y`` cut into ``n_partitions`` consecutive blocks of near-equal size."""
        bounds = np.linspace(0, len(X), n_partitions + 1).astype(int)
        return cls([(X[a:b], y[a:b]) for a, b in itertools.pairwise(bounds)])

    def __iter__(self) -> Iterator[Block]:
        return iter(self.blocks)

    def map_gather(self, fn: Callable[..., Any], *args: Any) -> list[Any]:
        """[fn(X_p, y_p, p, *args) for every partition p], in partition order."""
        return [fn(X, y, p, *args) for p, (X, y) in enumerate(self.blocks)]

    def map_sum(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Σ_p fn(X_p, y_p, p, *args)."""
        return sum_results(self.map_gather(fn, *args))


def _block(X: np.ndarray, y: np.ndarray, p: int) -> Block:
    return X, y


def collect(parts: RowPartitions) -> Block:
    """Every row in one ``(X, y)``: only for data known to fit in memory."""
    blocks = parts.map_gather(_block)
    return np.concatenate([X for X, _ in blocks]), np.concatenate([y for _, y in blocks])


def _labels(X: np.ndarray, y: np.ndarray, p: int) -> np.ndarray:
    return np.unique(y)


def partition_classes(parts: RowPartitions) -> np.ndarray:
    """The sorted distinct labels of every partition (one pass, only the labels move)."""
    return np.unique(np.concatenate(parts.map_gather(_labels)))
