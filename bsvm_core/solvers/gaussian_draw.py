"""Draws of β | λ, ω ~ N(b, B) for the data-augmented SVM, bayes-svm.md §3.1.

``B⁻¹ = P + X̃'Λ⁻¹X̃`` and ``b = B X̃'(1 + λ⁻¹)``, with ``P = diag(prior_precision)``.
Exact samplers with the same output:

* :class:`CholeskyWorkspace` factors the k×k precision, O(nk² + k³) per draw, for a fixed X̃ in a
  sampler loop: one syrk of the bordered matrix [Λ^{-1/2}X̃, λ^{1/2} + λ^{-1/2}] yields B⁻¹ and ρ,
  one Cholesky yields L and L⁻¹ρ, one triangular solve yields β and b (preallocated buffers, no
  per-draw set-up); :func:`draw_from_precision` is the same draw from a given precision matrix;
* :func:`draw_fast` is Bhattacharya, Chakraborty & Mallick (2016), O(n²k) per draw, for k ≫ n.
"""

from __future__ import annotations

import contextlib

import numpy as np
from numpy.typing import NDArray
from scipy import linalg

from .._blas import single_blas_thread_if

#: Prior precision given to flat-prior (unpenalised) coefficients by :func:`draw_fast`, which
#: needs every precision positive (§3.1); on the standardised scale this is a N(0, 100²) prior.
WEAK_PRECISION = 1e-4


#: Below this many flops per sweep (n·k² or n²·k) BLAS runs single-threaded: thread start-up and
#: oversubscription cost far more than they save on small matrices (10x slower on a loaded box).
SMALL_PROBLEM_FLOPS = 2e7


def blas_threads_for(n: int, k: int) -> contextlib.AbstractContextManager[None]:
    """A context limiting BLAS to one thread when a sweep's linear algebra is small."""
    return single_blas_thread_if(n * k * min(n, k) < SMALL_PROBLEM_FLOPS)


_potrf, _potrs, _trtrs = linalg.get_lapack_funcs(("potrf", "potrs", "trtrs"), dtype=np.float64)


def normal_equations(
    Xt: NDArray[np.float64], lam_inv: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """G = X̃'Λ⁻¹X̃ and ρ = X̃'(1 + λ⁻¹); Polson & Scott (2011) eq. 7."""
    root = Xt * np.sqrt(lam_inv)[:, np.newaxis]
    return root.T @ root, Xt.T @ (1.0 + lam_inv)  # A'A form: numpy calls BLAS syrk


def cholesky_jittered(Q: NDArray[np.float64]) -> NDArray[np.float64]:
    """Lower Cholesky factor of a symmetric positive-definite Q, adding jitter if round-off bites."""
    L, info = _potrf(Q, lower=1, clean=1, overwrite_a=0)
    if info == 0:
        return L
    scale = float(np.mean(np.abs(np.diag(Q)))) or 1.0
    for power in range(-12, -3):
        L, info = _potrf(Q + scale * 10.0**power * np.eye(Q.shape[0]), lower=1, clean=1)
        if info == 0:
            return L
    raise linalg.LinAlgError("precision matrix is not positive definite, even with jitter")


def cholesky_solve(L: NDArray[np.float64], rhs: NDArray[np.float64]) -> NDArray[np.float64]:
    """Solve (LL')x = rhs given the lower Cholesky factor L (LAPACK potrs)."""
    x, _ = _potrs(L, rhs, lower=1)
    return x


def draw_from_precision(
    Q: NDArray[np.float64], rho: NDArray[np.float64], z: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(β, b): b = Q⁻¹ρ and β = Q⁻¹(ρ + Lz) ~ N(b, Q⁻¹) for z ~ N(0, I), Q = LL' (Rue 2001)."""
    L = cholesky_jittered(Q)
    rhs = np.empty((Q.shape[0], 2))
    rhs[:, 0] = rho
    rhs[:, 1] = rho + L @ z
    both = cholesky_solve(L, rhs)
    return both[:, 1], both[:, 0]


class CholeskyWorkspace:
    """Buffers for repeated draws β ~ N(b, B), B⁻¹ = P + X̃'Λ⁻¹X̃, b = B X̃'(1 + λ⁻¹) (§3.1).

    With R = [Λ^{-1/2}X̃, a], a = λ^{1/2} + λ^{-1/2} (so R[:, :k]'a = X̃'(1 + λ⁻¹) = ρ), the
    bordered matrix R'R + diag(P, ·) = [[B⁻¹, ρ], [ρ', ·]] has the Cholesky factor
    [[L, 0], [(L⁻¹ρ)', s]]: one syrk and one potrf give L and v = L⁻¹ρ, and one triangular
    solve L'[β, b] = [v + z, v] gives b = B ρ and β = b + L'⁻¹z ~ N(b, B), z ~ N(0, I).
    The corner is set to 2a'a + 1 > ρ'Bρ, so that s² > 0 whatever the round-off.
    """

    def __init__(self, Xt: NDArray[np.float64]) -> None:
        n, k = Xt.shape
        self.k = k
        self.XA = np.asfortranarray(np.column_stack([Xt, np.ones(n)]))
        self.R = np.empty_like(self.XA)
        self.inv_root = np.empty(n)
        self.A = np.empty((k + 1, k + 1), order="F")
        self.diag = self.A.reshape(-1, order="F")[:: k + 2]  # a view on A's diagonal
        self.rhs = np.zeros((k + 1, 2), order="F")

    def draw(
        self,
        lam_inv_root: NDArray[np.float64],
        prior_precision: NDArray[np.float64],
        z: NDArray[np.float64],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(β, b) given λ^{-1/2}: β = b + L'⁻¹z ~ N(b, B), B⁻¹ = P + X̃'Λ⁻¹X̃, b = Bρ; §3.1."""
        k, R, A, rhs, diag = self.k, self.R, self.A, self.rhs, self.diag
        np.multiply(self.XA, lam_inv_root[:, np.newaxis], out=R)  # last column: λ^{-1/2}
        last = R[:, k]
        last += np.divide(1.0, lam_inv_root, out=self.inv_root)  # a = λ^{-1/2} + λ^{1/2}
        np.matmul(R.T, R, out=A.T)  # syrk: numpy detects the A'A form
        diag[:k] += prior_precision
        diag[k] = 2.0 * diag[k] + 1.0
        L, info = _potrf(A, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            return self._draw_jittered(prior_precision, z)
        v = L[k, :k]
        rhs[k] = 0.0
        rhs[:k, 1] = v
        np.add(v, z, out=rhs[:k, 0])
        x, _ = _trtrs(L, rhs, lower=1, trans=1, overwrite_b=1)
        return x[:k, 0].copy(), x[:k, 1].copy()

    def _draw_jittered(
        self, prior_precision: NDArray[np.float64], z: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The same draw from the k×k precision when round-off needs :func:`cholesky_jittered`."""
        X = self.R[:, : self.k]
        Q = X.T @ X
        Q.flat[:: self.k + 1] += prior_precision
        return draw_from_precision(Q, X.T @ self.R[:, self.k], z)


def draw_fast(
    Xt: NDArray[np.float64],
    lam_inv: NDArray[np.float64],
    prior_precision: NDArray[np.float64],
    rng: np.random.Generator,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(β, b) by Bhattacharya, Chakraborty & Mallick (2016), Biometrika 103(4), O(n²k).

    Φ = Λ^{-1/2}X̃, D = P⁻¹, a = λ^{1/2} + λ^{-1/2}; u ~ N(0, D), δ ~ N(0, I_n), v = Φu + δ,
    w = (ΦDΦ' + I)⁻¹(a − v), β = u + DΦ'w.  The mean is b = DΦ'(ΦDΦ' + I)⁻¹a (Woodbury).
    Zero precisions (flat priors) are replaced by :data:`WEAK_PRECISION`.
    """
    n = Xt.shape[0]
    d = 1.0 / np.where(prior_precision > 0.0, prior_precision, WEAK_PRECISION)
    root = np.sqrt(lam_inv)
    Phi = Xt * root[:, np.newaxis]
    a = 1.0 / root + root
    PhiD = Phi * d
    M = PhiD @ Phi.T
    M.flat[:: n + 1] += 1.0
    L = cholesky_jittered(M)
    u = np.sqrt(d) * rng.standard_normal(Xt.shape[1])
    v = Phi @ u + rng.standard_normal(n)
    w = cholesky_solve(L, np.column_stack([a - v, a]))
    beta, b = (PhiD.T @ w).T
    return u + beta, b
