"""Scoring rows against support vectors with the rbf kernel, and a float32 screen for labels.

The exponent a = −γ‖x − s‖² of every (row, support vector) pair comes from one matrix product,

    a = [2γx̃, −γ‖x̃‖², −1] · [s̃, 1, γ‖s̃‖²]ᵀ,   x̃ = x − c, s̃ = s − c,

with c the support vectors' mean (the kernel is translation invariant; centring keeps the norms,
hence the cancellation, small), clipped at 0 from above; the support vectors' factor is made once.

Labels need only the sign (or the order) of the decision values, so they may come from a kernel
whose exponential is taken in float32 (SIMD, several times faster than float64's), as long as
every row whose label could differ from the float64 computation's is scored again in float64.
The bound: for a ≤ 0, rounding a to float32 changes e^a by at most e^a |a| 2⁻²⁴ ≤ 2⁻²⁴ / e
(x e⁻ˣ ≤ 1/e), and numpy's float32 exp is within ``EXP32_ULPS`` units in the last place, i.e.
EXP32_ULPS · 2⁻²³ e^a ≤ EXP32_ULPS · 2⁻²³ (or 2⁻¹²⁶ absolute where float32 underflows). Each
kernel entry is thus off by at most ``KERNEL_ERROR``, and a decision value Σ_s w_s K_s + b by at
most KERNEL_ERROR · Σ_s |w_s|, plus the two float64 products' own rounding, m 2⁻⁵³ Σ_s |w_s| each
(Higham 2002, eq. 3.5, with K ≤ 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ._einsum import einsum

EXP32_ULPS = 4.0
"""Error of numpy's float32 exp in units in the last place that the bound allows: measured at
2.54 at most over 25 million arguments in [−104, 0] (numpy 2.4, AVX2), 1 for libm's expf."""

KERNEL_ERROR = 2.0**-24 * (math.exp(-1.0) + 2.0 * EXP32_ULPS) * (1.0 + 2.0**-20) + 2.0**-126
"""Bound on |K₃₂ − K₆₄| of one kernel entry, K₃₂ = float(exp32(float32(a))), K₆₄ = exp(a), a ≤ 0."""


def _column_sums(S: np.ndarray) -> np.ndarray:
    """Σ_i S_i, the sum ``np.add.reduce(S, axis=0)`` makes (the mean as ``ndarray.mean`` makes
    it: sum, then divide). On C-ordered S of two columns or more both add the rows one after
    another, so ``einsum``'s sum is the same float to the bit (but a zero's sign) in half the
    time (wine 4.6 against 8.3 µs: the ufunc's outer loop steps row by row); otherwise (one
    column: the ufunc sums pairwise) the ufunc's own."""
    if S.flags.c_contiguous and S.shape[1] > 1:
        return einsum("ij->j", S)
    return np.add.reduce(S, axis=0)


def rbf_centred(
    S: np.ndarray,
    gamma: float,
    empty: Callable[..., np.ndarray] = np.empty,
    norms: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(c, S − c, γ‖S − c‖² by row): c = Σ_i s_i / m, the mean of S's rows. ``empty`` makes the
    centred copy of S (a ``workspace.workspace``'s, say); ``norms`` (m), if given, takes the
    last."""
    m, d = S.shape
    if m:
        center = _column_sums(S)
        center /= m  # in place: the same quotient
    else:
        center = np.zeros(d)
    Sc = np.subtract(S, center, out=empty(S.shape))
    norms = einsum("ij,ij->i", Sc, Sc) if norms is None else einsum("ij,ij->i", Sc, Sc, out=norms)
    norms *= gamma  # in place: the product γ‖s̃‖² as before
    return center, Sc, norms


def rbf_support_factor(
    S: np.ndarray, gamma: float, empty: Callable[..., np.ndarray] = np.empty
) -> tuple[np.ndarray, np.ndarray]:
    """(c, R): c the mean of the support vectors S and R = [S − c, 1, γ‖S − c‖²]ᵀ, (d + 2, m), from
    :func:`rbf_centred`. ``empty`` makes R and the centred copy of S (a ``workspace.workspace``'s,
    say)."""
    m, d = S.shape
    right = empty((d + 2, m))
    center, Sc, _ = rbf_centred(S, gamma, empty, norms=right[-1])
    right[:-2] = Sc.T
    right[-2] = 1.0
    return center, right


def float64_exp_is_simd() -> bool:
    """Whether numpy's float64 exp runs on SIMD here: numpy vectorises it only for AVX-512F, while
    float32's also has an AVX2 loop."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__
    except ImportError:  # numpy < 2
        from numpy.core._multiarray_umath import __cpu_features__
    return bool(__cpu_features__.get("AVX512F"))


FLOAT32_SCREEN = not float64_exp_is_simd()
"""Whether ``predict`` screens labels with the float32 exp. With AVX2 only, float64's exp is
scalar (5 ns an entry against float32's 1.35 ns; 100 rows × 119 support vectors: 134 → 106 µs
with the screen); with AVX-512F, float64's exp takes 0.7 ns and the screen's clip, cast, exp and
copy back 1.5 ns, so labels come straight from float64."""


FLOAT32_MIN_ENTRIES = 4096
"""rbf labels are screened with float32 exponentials from this many kernel entries (rows × support
vectors): below it the screen's fixed cost (a few µs) outweighs what the float32 exp saves (about
3.5 ns an entry: 5 ns in float64, 1.4 ns in float32 with AVX2)."""

FLOAT32_FLOOR = -110.0
"""Exponents are raised to this before the float32 exp (no overflow in the cast): e⁻¹¹⁰ < 2⁻¹²⁶."""


def rbf_product(X: np.ndarray, center: np.ndarray, right: np.ndarray, gamma: float) -> np.ndarray:
    """−γ‖x̃ − s̃‖² for every row x of X and support vector s, up to rounding (not clipped), by
    one product [2γx̃, −γ‖x̃‖², −1] · R with (c, R) from :func:`rbf_support_factor`."""
    left = np.empty((X.shape[0], X.shape[1] + 2))
    Xc = np.subtract(X, center, out=left[:, :-2])
    einsum("ij,ij->i", Xc, Xc, out=left[:, -2])
    left[:, -2] *= -gamma
    left[:, -1] = -1.0
    Xc *= 2.0 * gamma
    return left @ right


def rbf_exponent(X: np.ndarray, center: np.ndarray, right: np.ndarray, gamma: float) -> np.ndarray:
    """a = min(−γ‖x̃ − s̃‖², 0): :func:`rbf_product` clipped at 0 (rounding may overshoot it)."""
    A = rbf_product(X, center, right, gamma)
    return np.minimum(A, 0.0, out=A)


def exp_float32(A: np.ndarray) -> np.ndarray:
    """exp(min(A, 0)) in place, taken in float32 with A first raised to ``FLOAT32_FLOOR``: within
    ``KERNEL_ERROR`` of float64's exp(min(A, 0))."""
    scratch = np.clip(A, FLOAT32_FLOOR, 0.0, out=A).astype(np.float32)
    np.exp(scratch, out=scratch)
    np.copyto(A, scratch)
    return A


def decision_error_bound(W: np.ndarray) -> np.ndarray:
    """Per column of W (m, p): how far K₃₂ W may be from K₆₄ W, computed products included."""
    m = W.shape[0]
    return (KERNEL_ERROR + 2.0 * m * 2.0**-53) * (1.0 + 1e-6) * np.add.reduce(np.abs(W), axis=0)
