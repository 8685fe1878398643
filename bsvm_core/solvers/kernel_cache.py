"""A bounded least-recently-used cache of kernel rows K(x_i, X), filled on demand."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

RowFunction = Callable[[int, np.ndarray], None]
"""``compute(i, out)`` writes the kernel row K(x_i, X) of length n into the float64 ``out``."""


def cache_capacity(n: int, cache_mb: float, itemsize: int = 8) -> int:
    """Number of rows of length n that fit in ``cache_mb`` megabytes (at least 2, at most n)."""
    rows = int(cache_mb * 2**20 // (itemsize * max(n, 1)))
    return max(2, min(n, rows))


class KernelRowCache:
    """LRU cache of kernel rows in one preallocated (capacity, n) block; never more memory.

    Rows are float64 so the solver uses them in place (no conversion per iteration); measured on
    make_classification(10k-20k), a float32 block (twice the rows) saved under 10 % of row
    computations because SMO's working set keeps moving.

    Parameters
    ----------
    compute : callable
        ``compute(i, out)`` fills ``out`` (shape (n,)) with K(x_i, X).
    n : int
        Number of training points.
    cache_mb : float
        Memory budget of the block in megabytes.
    empty : callable
        Makes the block (``np.empty``, or a ``workspace.workspace``'s).
    """

    distances = False
    """Rows are kernel values (see :class:`DenseKernelRows`)."""

    def __init__(
        self,
        compute: RowFunction,
        n: int,
        cache_mb: float,
        empty: Callable[..., np.ndarray] = np.empty,
    ) -> None:
        self.compute = compute
        self.capacity = cache_capacity(n, cache_mb)
        self.block = empty((self.capacity, n))
        self._slot_of = [-1] * n
        self._index_of = [-1] * self.capacity
        self._last_used = np.zeros(self.capacity, dtype=np.int64)
        self._n_filled = 0
        self._tick = 0
        self.n_computed = 0

    @property
    def nbytes(self) -> int:
        """Bytes of the rows filled so far (the block's untouched rows take no memory)."""
        return self._n_filled * self.block.shape[1] * self.block.itemsize

    def row(self, i: int) -> np.ndarray:
        """Return K(x_i, X) (a view into the cache, valid until two more rows are requested)."""
        self._tick += 1
        slot = self._slot_of[i]
        if slot < 0:
            if self._n_filled < self.capacity:
                slot = self._n_filled
                self._n_filled += 1
            else:
                slot = int(self._last_used.argmin())
                self._slot_of[self._index_of[slot]] = -1
            self._slot_of[i] = slot
            self._index_of[slot] = i
            self.compute(i, self.block[slot])
            self.n_computed += 1
        self._last_used[slot] = self._tick
        return self.block[slot]


class DenseKernelRows:
    """Every kernel row at hand: the rows of a full kernel matrix, with :class:`KernelRowCache`'s
    interface (``row(i)``, ``n_computed``, ``nbytes``), for problems whose matrix fits the budget.

    ``n_computed`` counts the matrix's n rows from the start, so a solver's count of the rows it
    computed itself is 0. With ``distances``, the matrix is D = max(1 − K, τ/2) of a kernel with
    K_ii = 1 (rbf): each row is then half the curvatures a_it / 2 that SMO needs.
    """

    def __init__(self, K: np.ndarray, distances: bool = False) -> None:
        self.K = K
        self.distances = distances
        self.n_computed = K.shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes of the matrix."""
        return self.K.nbytes

    def row(self, i: int) -> np.ndarray:
        """Return K(x_i, X), a view into the matrix."""
        return self.K[i]
