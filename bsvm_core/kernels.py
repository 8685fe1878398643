"""Kernel functions k(x, z) as pure functions on arrays, and the resolution of ``gamma``.

Every kernel takes ``X`` of shape (n, d) and ``Z`` of shape (m, d) and returns the (n, m) Gram block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .exceptions import BsvmValueError

KERNELS = ("linear", "poly", "rbf", "sigmoid")
"""Names of the built-in kernels."""


def variance(X: np.ndarray) -> float:
    """Var(X) over all entries of float64 X, Σ(x − x̄)² / N: ``ndarray.var``'s passes (pairwise sum,
    subtract, square, pairwise sum; the same float to the bit), without its ~5 µs of Python. The
    mean is a Python float: x̄ = Σx / N is the same IEEE quotient as numpy's in-place division of
    its (1, 1) sum, and x − x̄ the same difference (~2 µs less than a (1, 1) array on wine)."""
    size = X.size
    centred = np.subtract(X, float(np.add.reduce(X, axis=None)) / size)
    np.multiply(centred, centred, out=centred)
    return float(np.add.reduce(centred, axis=None)) / size


def resolve_gamma(gamma: str | float, X: np.ndarray) -> float:
    """Return gamma: "scale" = 1 / (d Var(X)) and "auto" = 1 / d, as scikit-learn's SVC; or the float."""
    n_features = X.shape[1]
    if isinstance(gamma, str):
        if gamma == "scale":
            var = variance(X)
            return 1.0 / (n_features * var) if var > 0.0 else 1.0
        if gamma == "auto":
            return 1.0 / n_features
    elif (
        isinstance(gamma, int | float | np.number)
        and not isinstance(gamma, bool)
        and np.isfinite(gamma)
        and gamma > 0
    ):
        return float(gamma)
    raise BsvmValueError(f"gamma must be 'scale', 'auto' or a float > 0, got {gamma!r}.")


def linear_kernel(X: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """k(x, z) = x'z."""
    return X @ Z.T


def poly_kernel(
    X: np.ndarray, Z: np.ndarray, gamma: float, degree: int, coef0: float
) -> np.ndarray:
    """k(x, z) = (gamma x'z + coef0)^degree; homogeneous when coef0 = 0."""
    K = X @ Z.T
    K *= gamma
    K += coef0
    return K**degree


def rbf_kernel(
    X: np.ndarray,
    Z: np.ndarray,
    gamma: float,
    x_sq: np.ndarray | None = None,
    z_sq: np.ndarray | None = None,
) -> np.ndarray:
    """k(x, z) = exp(-gamma ||x - z||²) with ||x - z||² = ||x||² + ||z||² - 2 x'z (norms optional)."""
    if x_sq is None:
        x_sq = np.einsum("ij,ij->i", X, X)
    if z_sq is None:
        z_sq = np.einsum("ij,ij->i", Z, Z)
    K = X @ Z.T
    K *= -2.0
    K += x_sq[:, None]
    K += z_sq[None, :]
    np.maximum(K, 0.0, out=K)
    K *= -gamma
    return np.exp(K, out=K)


def sigmoid_kernel(X: np.ndarray, Z: np.ndarray, gamma: float, coef0: float) -> np.ndarray:
    """k(x, z) = tanh(gamma x'z + coef0); not positive semi-definite in general."""
    K = X @ Z.T
    K *= gamma
    K += coef0
    return np.tanh(K, out=K)


def kernel_matrix(
    X: np.ndarray,
    Z: np.ndarray,
    kernel: str | Callable[..., Any],
    gamma: float = 1.0,
    degree: int = 3,
    coef0: float = 0.0,
    z_sq: np.ndarray | None = None,
) -> np.ndarray:
    """Gram block K(X, Z) of a named kernel or of a callable ``kernel(X, Z) -> (n, m)``.

    ``z_sq``, the squared norms of Z's rows, spares the rbf kernel computing them (others ignore it).
    """
    if callable(kernel):
        K = np.asarray(kernel(X, Z), dtype=np.float64)
        if K.shape != (X.shape[0], Z.shape[0]):
            raise ValueError(
                f"the callable kernel returned shape {K.shape}, expected {(X.shape[0], Z.shape[0])}."
            )
        return K
    if kernel == "linear":
        return linear_kernel(X, Z)
    if kernel == "poly":
        return poly_kernel(X, Z, gamma, degree, coef0)
    if kernel == "rbf":
        return rbf_kernel(X, Z, gamma, z_sq=z_sq)
    if kernel == "sigmoid":
        return sigmoid_kernel(X, Z, gamma, coef0)
    raise ValueError(f"kernel must be one of {KERNELS} or a callable, got {kernel!r}.")


def kernel_diagonal(
    X: np.ndarray,
    kernel: str | Callable[..., Any],
    gamma: float = 1.0,
    degree: int = 3,
    coef0: float = 0.0,
) -> np.ndarray:
    """Diagonal k(x_i, x_i) without the full Gram matrix (row by row for a callable)."""
    if callable(kernel):
        return np.array(
            [kernel_matrix(X[i : i + 1], X[i : i + 1], kernel)[0, 0] for i in range(len(X))]
        )
    if kernel == "rbf":
        return np.ones(X.shape[0])
    sq = np.einsum("ij,ij->i", X, X)
    if kernel == "linear":
        return sq
    if kernel == "poly":
        return (gamma * sq + coef0) ** degree
    if kernel == "sigmoid":
        return np.tanh(gamma * sq + coef0)
    raise ValueError(f"kernel must be one of {KERNELS} or a callable, got {kernel!r}.")


def kernel_row_function(
    X: np.ndarray,
    kernel: str | Callable[..., Any],
    gamma: float = 1.0,
    degree: int = 3,
    coef0: float = 0.0,
) -> Callable[[int, np.ndarray], None]:
    """Return ``row(i, out)`` writing K(x_i, X) into the float64 vector ``out``, allocation-free.

    rbf forms the distances in float64 (no cancellation loss) and evaluates the exponential in
    float32 (SIMD, several times faster; relative error 1e-7, the precision of libsvm's cache).
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    if callable(kernel):

        def row(i: int, out: np.ndarray) -> None:
            out[:] = kernel_matrix(X[i : i + 1], X, kernel)[0]

        return row
    if kernel == "rbf":
        # exp(-gamma (|x_i|² + |x|² - 2 x_i'x)), norms precomputed once; centring X (the kernel
        # is translation invariant) keeps the norms small and the cancellation harmless
        X = X - X.mean(axis=0)
        g_sq = gamma * np.einsum("ij,ij->i", X, X)
        X2g = X * (2.0 * gamma)
        scratch = np.empty(X.shape[0], dtype=np.float32)

        def row(i: int, out: np.ndarray) -> None:
            np.dot(X2g, X[i], out=out)
            out -= g_sq
            out -= g_sq[i]
            np.minimum(out, 0.0, out=scratch)
            np.exp(scratch, out=scratch)
            np.copyto(out, scratch)

        return row
    if kernel == "linear":

        def row(i: int, out: np.ndarray) -> None:
            np.dot(X, X[i], out=out)

        return row
    if kernel == "poly":
        Xg = X * gamma

        def row(i: int, out: np.ndarray) -> None:
            np.dot(Xg, X[i], out=out)
            out += coef0
            np.power(out, degree, out=out)

        return row
    if kernel == "sigmoid":
        Xg = X * gamma

        def row(i: int, out: np.ndarray) -> None:
            np.dot(Xg, X[i], out=out)
            out += coef0
            np.tanh(out, out=out)

        return row
    raise ValueError(f"kernel must be one of {KERNELS} or a callable, got {kernel!r}.")


def float32_exponent_bound(d: int, gamma_max_sq: float) -> float:
    """(d + 4) 2⁻²⁴ γ (2 max‖x − x̄‖)² from d and γ max‖x − x̄‖²: the bound of
    :func:`float32_exponent_error` (Higham 2002, eq. 3.5)."""
    return (d + 4) * 2.0**-24 * 4.0 * gamma_max_sq


def float32_exponent_error(X: np.ndarray, gamma: float) -> float:
    """Bound on the error of the float32 rbf exponents of :func:`kernel_block_function`,
    (d + 4) 2⁻²⁴ γ (2 max‖x − x̄‖)² (Higham 2002, eq. 3.5, over the d + 2 terms of each product and
    the rounding of its inputs); the kernel's relative error is at most about as large."""
    centred = X - X.mean(axis=0)
    centred_sq = np.einsum("ij,ij->i", centred, centred)
    return float32_exponent_bound(X.shape[1], gamma * float(centred_sq.max(initial=0.0)))


BlockFunction = Callable[..., None]
"""``block(idx, out, cols=None)`` writes K(X[idx], X[cols]) (cols None: all of X) into ``out`` of
shape (len(idx), len(cols))."""


def _column_selector(right: np.ndarray) -> Callable[[np.ndarray | None], np.ndarray]:
    """``select(cols)`` = right[:, cols] (right itself for None), reusing the last two gathers
    (the batched solver alternates its active columns and its working set's)."""
    last: list[tuple[np.ndarray, np.ndarray]] = []

    def select(cols: np.ndarray | None) -> np.ndarray:
        if cols is None:
            return right
        for kept, gathered in last:
            if kept is cols:
                return gathered
        last.insert(0, (cols, np.ascontiguousarray(right[:, cols])))
        del last[2:]
        return last[0][1]

    return select


def kernel_block_function(
    X: np.ndarray,
    kernel: str | Callable[..., Any],
    gamma: float = 1.0,
    degree: int = 3,
    coef0: float = 0.0,
    dtype: type = np.float32,
) -> BlockFunction:
    """Return ``block(idx, out, cols=None)`` writing K(X[idx], X[cols]) into ``out`` by one GEMM.

    rbf folds the squared norms into the product, −γ‖x_i − x_t‖² = [2γx_i, −γ‖x_i‖², −1] ·
    [x_t, 1, γ‖x_t‖²], on centred X (translation invariance keeps the norms, hence the cancellation,
    small), so a block costs one (q, d + 2) × (d + 2, n) product and an exponential. Distances are
    not clipped at 0, so K may exceed 1 by a rounding error: callers floor the curvature. The gathered
    columns of the last ``cols`` array are kept, so pass the same array object while it is unchanged.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    if callable(kernel):

        def block(idx: np.ndarray, out: np.ndarray, cols: np.ndarray | None = None) -> None:
            out[...] = kernel_matrix(X[idx], X if cols is None else X[cols], kernel)

        return block
    if kernel == "rbf":
        Xc = X - X.mean(axis=0)
        g_sq = gamma * np.einsum("ij,ij->i", Xc, Xc)
        n = Xc.shape[0]
        columns = np.empty((Xc.shape[1] + 2, n), dtype=dtype)  # [x_t, 1, γ‖x_t‖²] by column
        columns[:-2] = Xc.T
        columns[-2] = 1.0
        columns[-1] = g_sq
        del Xc
        right = _column_selector(columns)
        twice_gamma = dtype(2.0 * gamma)

        def block(idx: np.ndarray, out: np.ndarray, cols: np.ndarray | None = None) -> None:
            # the rows [2γx_i, −γ‖x_i‖², −1], made from the columns: no second copy of X is kept
            left = np.empty((idx.size, columns.shape[0]), dtype=dtype)
            np.multiply(columns[:-2, idx].T, twice_gamma, out=left[:, :-2])
            np.negative(columns[-1, idx], out=left[:, -2])
            left[:, -1] = -1.0
            np.dot(left, right(cols), out=out)
            np.exp(out, out=out)

        return block
    Xd = X.astype(dtype)
    right = _column_selector(np.ascontiguousarray(Xd.T))
    if kernel == "linear":

        def block(idx: np.ndarray, out: np.ndarray, cols: np.ndarray | None = None) -> None:
            np.dot(Xd[idx], right(cols), out=out)

        return block
    Xg = (X * gamma).astype(dtype)
    if kernel == "poly":

        def block(idx: np.ndarray, out: np.ndarray, cols: np.ndarray | None = None) -> None:
            np.dot(Xg[idx], right(cols), out=out)
            out += coef0
            np.power(out, degree, out=out)

        return block
    if kernel == "sigmoid":

        def block(idx: np.ndarray, out: np.ndarray, cols: np.ndarray | None = None) -> None:
            np.dot(Xg[idx], right(cols), out=out)
            out += coef0
            np.tanh(out, out=out)

        return block
    raise ValueError(f"kernel must be one of {KERNELS} or a callable, got {kernel!r}.")
