"""Whole kernel matrices of the small problems: the dense binary path's and lockstep's rbf matrix
of D = 1 − K (upper triangle by row-block products, mirrored), with D^(−1/2) on request, and the
float32 test for rbf blocks.

The solvers take these matrices from ``kernel_dual``; the maths of one block is
``kernels.kernel_block_function``'s product on centred data.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._blas import single_blas_thread
from ._einsum import einsum
from .kernels import float32_exponent_bound, float32_exponent_error, kernel_block_function
from .rbf_scoring import exp_float32, rbf_centred, rbf_product
from .solvers.smo import TAU
from .workspace import Empty, workspace

FLOAT32_EXPONENT_MAX_ERROR = 1e-3
"""rbf kernel blocks are products in float32 (twice as fast) only when the exponents' error bound
is below this: the bound is 6e-4 on standardised digits and 1e-4 on breast cancer (worst pairs;
typical errors are ~√d times smaller); far-flung data or a large gamma (say 5e5 for γ‖x‖²) would
make float32's cancellation shift even k(x, x) by several per cent, so those take float64."""

SYMMETRIC_MIN_BLOCK_ROWS = 128
"""Fewest rows of a block of :func:`rbf_symmetric_fill` (which takes a quarter of n by default):
measured on breast cancer 0.70 ms at 128 rows, 0.85 at 512; digits 9.1 ms at 128, 7.8 at 512."""


SMALL_SCRATCH_BYTES = 64 * 2**10
"""Scratch arrays of :func:`rbf_symmetric_fill` up to this size (the centred data and the factors
of small sets: wine's are 6-18 KB) come from ``np.empty`` (~0.2 µs), not the fill's workspace
(~2 µs a call): below glibc's mmap threshold (128 KB at least), malloc hands back freed memory
without fresh pages, so the workspace's saving of page faults does not arise."""


def _scratch(kept: Empty) -> Empty:
    """``empty(shape, dtype)``: ``np.empty`` for arrays of at most ``SMALL_SCRATCH_BYTES``, else
    ``kept``'s (a ``workspace.workspace``'s)."""

    def empty(shape: int | tuple[int, ...], dtype: type = np.float64) -> np.ndarray:
        size = shape if isinstance(shape, int) else math.prod(shape)
        small = size * (4 if dtype is np.float32 else 8) <= SMALL_SCRATCH_BYTES
        return np.empty(shape, dtype=dtype) if small else kept(shape, dtype=dtype)

    return empty


def float32_blocks(X: np.ndarray, kernel: Any, gamma: float) -> bool:
    """rbf kernel blocks may be computed in float32: the exponents' error bound
    (``kernels.float32_exponent_error``) is at most ``FLOAT32_EXPONENT_MAX_ERROR``."""
    return kernel == "rbf" and float32_exponent_error(X, gamma) <= FLOAT32_EXPONENT_MAX_ERROR


def matrix_block(
    M: np.ndarray, distances: bool, rows: np.ndarray | None = None
) -> Callable[..., None]:
    """``block(idx, out, cols=None)`` writing K[rows[idx]][:, rows[cols]] (``rows`` None: all of
    M's rows; ``cols`` None: all the problem's columns) from the kernel matrix M, or from
    M = 1 − K with ``distances``. Two takes: half the time of one np.ix_ gather."""

    def block(idx: np.ndarray, out: np.ndarray, cols: np.ndarray | None = None) -> None:
        picked = idx if rows is None else rows[idx]
        columns = cols if rows is None else rows if cols is None else rows[cols]
        if columns is None and M.dtype == out.dtype:  # straight into out: no temporary
            np.take(M, picked, axis=0, out=out)
            if distances:
                np.subtract(1.0, out, out=out)
            return
        taken = M.take(picked, axis=0)
        if columns is not None:
            taken = taken.take(columns, axis=1)
        if distances:
            np.subtract(1.0, taken, out=out)
        else:
            out[...] = taken

    return block


def rbf_symmetric_fill(
    X: np.ndarray,
    gamma: float,
    M: np.ndarray,
    finish: Callable[[np.ndarray, np.ndarray], None],
    block_rows: int | None = None,
    twin: np.ndarray | None = None,
    inverse: np.ndarray | None = None,
) -> None:
    """Fill the symmetric n × n M with finish(K-block, out) of the rbf kernel K, computing only
    the upper triangle: row block [r0, r1) against columns r0.. by one product −γ‖x_i − x_t‖² =
    [2γx̃_i, −γ‖x̃_i‖², −1] · [x̃_t, 1, γ‖x̃_t‖²] on centred x̃ (``rbf_scoring.rbf_centred``;
    float32 when the bound of :func:`float32_blocks` allows, else float64 with a float32
    exponential), finished in place (out is the float32 block itself), copied into M and mirrored
    into the rows below from the float32 block: about half the products and exponentials of a full
    fill. ``twin`` (another n × n array) gets the same copies: two writes from the block in cache
    cost less than a copy of M afterwards (moons(400): 0.31 against 0.37 ms); the [D | D] of
    :func:`rbf_distance_matrix` takes one write a block, through an n × 2 × n view. ``inverse``
    (another n × n array) gets 1 / √ of the finished values, taken in float32 from the block in
    cache (SIMD sqrt and divide, ~4x float64's) and mirrored alike. Blocks of ``block_rows`` rows
    (default: a quarter of n, at least ``SYMMETRIC_MIN_BLOCK_ROWS``)."""
    targets = (M[:, None],) if twin is None else (M[:, None], twin[:, None])
    _fill(X, gamma, targets, finish, block_rows, inverse)


def _float32_factors(
    Sc: np.ndarray, norms: np.ndarray, gamma: float, empty: Empty = np.empty
) -> tuple[np.ndarray, np.ndarray]:
    """(L, R) in float32, L = [2γx̃_i, γ‖x̃_i‖², −1] by row and R = [x̃_t, −1, γ‖x̃_t‖²] by column,
    each entry its float64 value rounded once (x̃ = Sc, γ‖x̃‖² = norms): one buffer from ``empty``,
    six writes. The term −γ‖x̃_i‖² · 1 is taken as γ‖x̃_i‖² · (−1), the same float (a sign moved
    between exact factors), so L's column is a cast copy of the norms, not a negation (~0.8 µs)."""
    n, d = Sc.shape
    factors = empty(2 * n * (d + 2), dtype=np.float32)
    right = factors[: n * (d + 2)].reshape(d + 2, n)
    left = factors[n * (d + 2) :].reshape(n, d + 2)
    right[:d] = Sc.T
    right[d] = -1.0
    right[d + 1] = norms
    np.multiply(Sc, 2.0 * gamma, out=left[:, :d], casting="same_kind")
    left[:, d] = norms
    left[:, d + 1] = -1.0
    return left, right


def _fill(
    X: np.ndarray,
    gamma: float,
    targets: tuple[np.ndarray, ...],
    finish: Callable[[np.ndarray, np.ndarray], None],
    block_rows: int | None,
    inverse: np.ndarray | None,
) -> None:
    """:func:`rbf_symmetric_fill` into ``targets``, n × k × n views (k copies of M side by side,
    row by row: [D | D] is one such view, written by one copy a block)."""
    n, d = X.shape
    if block_rows is None:
        block_rows = max(SYMMETRIC_MIN_BLOCK_ROWS, -(-n // 4))
    block_rows = max(1, min(block_rows, n))
    with workspace() as kept, single_blas_thread():  # blocks: kept buffers
        # small factors from np.empty: all of them when the largest (n (d + 2) float64 entries:
        # the centred data, L and R) is small, without a size test a call
        small = n * (d + 2) * 8 <= SMALL_SCRATCH_BYTES
        scratch_of: Empty = np.empty if small else _scratch(kept)
        center, Sc, norms = rbf_centred(X, gamma, scratch_of)
        bound = float32_exponent_bound(d, float(np.maximum.reduce(norms, initial=0.0)))
        if bound <= FLOAT32_EXPONENT_MAX_ERROR:
            left, right = _float32_factors(Sc, norms, gamma, scratch_of)

            def upper(r0: int, r1: int, out: np.ndarray) -> None:
                np.dot(left[r0:r1], right[:, r0:], out=out)
                np.exp(out, out=out)

        else:
            right64 = np.empty((d + 2, n))  # [x̃_t, 1, γ‖x̃_t‖²] by column
            right64[:d], right64[d], right64[d + 1] = Sc.T, 1.0, norms

            def upper(r0: int, r1: int, out: np.ndarray) -> None:
                out[...] = exp_float32(rbf_product(X[r0:r1], center, right64[:, r0:], gamma))

        scratch = kept(block_rows * n, dtype=np.float32)
        for r0 in range(0, n, block_rows):
            r1 = min(r0 + block_rows, n)
            E = scratch[: (r1 - r0) * (n - r0)].reshape(r1 - r0, n - r0)  # contiguous: a GEMM out
            upper(r0, r1, E)
            finish(E, E)
            E3, below = E[:, None], E[:, r1 - r0 :].T[:, None]
            for target in targets:
                target[r0:r1, :, r0:] = E3
                if r1 < n:  # the last block has no rows below
                    target[r1:, :, r0:r1] = below
            if inverse is not None:  # E is copied: its roots in place
                np.sqrt(E, out=E)
                np.divide(np.float32(1.0), E, out=E)  # reciprocal's bits (IEEE division), SIMD
                inverse[r0:r1, r0:] = E
                if r1 < n:
                    inverse[r1:, r0:r1] = E[:, r1 - r0 :].T


def dense_kernel_matrix(
    X: np.ndarray,
    kernel: Any,
    kw: dict[str, Any],
    empty: Empty = np.empty,
    doubled: bool = False,
    inverse: np.ndarray | None = None,
) -> np.ndarray:
    """The float64 kernel matrix of X by one product; rbf gives D = max(1 − K, τ/2) instead
    (:func:`rbf_distance_matrix` in float64), SMO's half curvatures (``DenseKernelRows`` with
    distances), with ``doubled`` (rbf only) as [D | D] (``solvers.smo_distances``) and
    ``inverse`` (rbf only) D^(−1/2). ``empty`` makes the matrix (a ``workspace.workspace``'s,
    say)."""
    if kernel == "rbf":
        return rbf_distance_matrix(X, kw["gamma"], empty, np.float64, doubled, inverse)
    n = X.shape[0]
    M = empty((n, n))
    with single_blas_thread():
        kernel_block_function(X, kernel, **kw, dtype=np.float64)(np.arange(n), M)
    return M


_HALF_TAU32 = np.float32(0.5 * TAU)


def _distances_into(E: np.ndarray, out: np.ndarray) -> None:
    """out = max(1 − E, τ/2) for a block E of kernel values (float32 E; out float32 or 64, or E).

    The floor is set where it bites only (the diagonal and near-duplicate rows): numpy's
    ``maximum`` against a scalar takes 4x a compare's time (moons(400): 60 against 14 µs)."""
    np.subtract(np.float32(1.0), E, out=E)
    if out is not E:
        np.copyto(out, E)
    # NaN compares false and stays, as in maximum; flatnonzero's wrappers cost ~1.5 µs a call
    low = np.less(E, _HALF_TAU32).ravel().nonzero()[0]
    if low.size:
        np.put(out, low, _HALF_TAU32)


def _distances_off_diagonal(E: np.ndarray, out: np.ndarray) -> None:
    """out = max(1 − E, τ/2) for a block E of kernel values (float32 E; out float32 or 64, or E)
    of :func:`rbf_symmetric_fill`, but on its leading diagonal E[k, k] (the matrix's diagonal,
    which the caller sets): 1 there.

    The floor bites exactly where E ≥ 1 (or E is +inf): for E ≥ 1, 1 − E ≤ 0 < τ/2; for E < 1,
    E ≤ 1 − 2⁻²⁴, and 1 − E is exact (Sterbenz) for E ≥ 1/2, so at least 2⁻²⁴, or above 1/2 for
    E < 1/2; either way above τ/2 = 5e-13. So the block's largest entry off the diagonal (the
    diagonal zeroed first) below 1 leaves 1 − E as it is: one SIMD reduction (moons(400) 3.2 µs a
    block) rather than a compare and its nonzero (5.5 µs); a NaN fails the test and the floor is
    then set as in :func:`_distances_into` (NaN stays)."""
    einsum("ii->i", E[:, : E.shape[0]])[...] = 0.0
    top = np.maximum.reduce(E, axis=None)
    if top < 1.0:
        np.subtract(np.float32(1.0), E, out=E)
        if out is not E:
            np.copyto(out, E)
    else:
        _distances_into(E, out)


def rbf_distance_matrix(
    X: np.ndarray,
    gamma: float,
    empty: Empty = np.empty,
    dtype: type = np.float32,
    doubled: bool = False,
    inverse: np.ndarray | None = None,
) -> np.ndarray:
    """D = max(1 − K, τ/2) of the rbf kernel over all rows, D_ii = τ/2 exactly (k(x, x) = 1,
    whatever the exponent's rounding), so a_ij = 2 D_ij ≥ τ; by :func:`rbf_symmetric_fill`.
    With ``doubled``, the n × 2n [D | D] (D is its left half). ``empty`` makes it (a
    ``workspace.workspace``'s, say). ``inverse`` (n × n) gets R = D^(−1/2) elementwise, from
    float32 D (R_ij within 1 float32 ulp of 1 / √D_ij; R_ii = (τ/2)^(−1/2) exactly)."""
    n = X.shape[0]
    halves = 2 if doubled else 1
    W3 = empty((n, halves, n), dtype=dtype)  # [D | D] row by row: one copy a block fills both
    _fill(X, gamma, (W3,), _distances_off_diagonal, None, inverse)
    # the diagonals of D and its twin as one view W3[i, :, i] (C einsum: no wrapper);
    # fill_diagonal walks a strided view: 50 µs
    einsum("iki->ik", W3)[...] = 0.5 * TAU
    if inverse is not None:
        einsum("ii->i", inverse)[...] = 1.0 / math.sqrt(0.5 * TAU)
    return W3.reshape(n, halves * n)
