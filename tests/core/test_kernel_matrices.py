"""The dense rbf fill against a straightforward float32 reference, to the bit: D = max(1 − K, τ/2)
by row blocks of the upper triangle, mirrored below; [D | D]; R = D^(−1/2); the floor test."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine, make_classification, make_moons
from sklearn.preprocessing import StandardScaler

from bsvm_core import kernel_matrices
from bsvm_core.rbf_scoring import rbf_support_factor
from bsvm_core.solvers.smo import TAU

HALF_TAU32 = np.float32(0.5 * TAU)


def reference(
    X: np.ndarray, gamma: float, block_rows: int, diagonals: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """(D, R) the plain way: float32 factors rounded from float64's, each block's product and
    exp in float32, 1 − E floored at τ/2 by np.maximum, R = 1 / √ in float32, rows [r0, r1)
    from columns r0 on and mirrored below; with ``diagonals``, D_ii = τ/2 and
    R_ii = (τ/2)^(−1/2) in float64."""
    n, d = X.shape
    _, right64 = rbf_support_factor(X, gamma)
    right = right64.astype(np.float32)
    left = np.hstack([right64[:d].T * (2.0 * gamma), -right64[-1:].T, -np.ones((n, 1))]).astype(
        np.float32
    )
    D, R = np.full((n, n), np.nan), np.full((n, n), np.nan)
    for r0 in range(0, n, block_rows):
        r1 = min(r0 + block_rows, n)
        E = np.exp(left[r0:r1] @ right[:, r0:])
        assert E.dtype == np.float32
        B = np.maximum(np.float32(1.0) - E, HALF_TAU32)
        S = np.float32(1.0) / np.sqrt(B)
        for M, block in ((D, B), (R, S)):
            M[r0:r1, r0:] = block
            M[r1:, r0:r1] = block[:, r1 - r0 :].T
    if diagonals:
        np.fill_diagonal(D, 0.5 * TAU)
        np.fill_diagonal(R, 1.0 / np.sqrt(0.5 * TAU))
    return D, R


def _sets() -> dict[str, np.ndarray]:
    scale = StandardScaler().fit_transform
    wine = scale(load_wine().data)
    moons = scale(make_moons(400, noise=0.3, random_state=0)[0])
    return {
        "wine": wine,
        "moons": moons,
        "cancer": scale(load_breast_cancer().data),
        "classification_50": scale(make_classification(50, 20, random_state=0)[0]),
        "classification_700": scale(make_classification(700, 20, random_state=1)[0]),
        # duplicated and near-duplicated rows: E ≥ 1 off the diagonal, the floor bites
        "wine_duplicated": np.vstack([wine, wine[:40], wine[:10] + 1e-9]),
        "moons_duplicated": np.vstack([moons[:300], moons[:300:3]]),
        "one_column": np.random.default_rng(0).standard_normal((200, 1)).round(2),
    }


SETS = _sets()


def assert_float64_exponents_fill(X: np.ndarray, gamma: float) -> None:
    """The fill whose exponents are too large for float32 products (float64 products, a float32
    exponential): D within float32's rounding of max(1 − exp(−γ‖x_i − x_t‖²), τ/2) computed plainly
    from the differences in float64, [D | D]'s halves equal, mirrored below the diagonal blocks,
    D_ii = τ/2, and R = D^(−1/2) within two float32 roundings of 1 / √D."""
    n = X.shape[0]
    exponent = -gamma * ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    D_exact = np.maximum(1.0 - np.exp(exponent), 0.5 * TAU)
    np.fill_diagonal(D_exact, 0.5 * TAU)
    R = np.full((n, n), np.nan)
    W = kernel_matrices.rbf_distance_matrix(X, gamma, np.empty, np.float64, True, R)
    D = W[:, :n]
    assert W[:, n:].tobytes() == D.tobytes()
    np.testing.assert_array_equal(np.diag(D), 0.5 * TAU)
    # float32 exp: within 4 ulp of K ≤ 1 (rbf_scoring.EXP32_ULPS), and 1 − E's own rounding
    np.testing.assert_allclose(D, D_exact, rtol=0, atol=1e-6)
    assert np.abs(D - D_exact).max() > 0.0  # float32 values: not float64's (the branch ran)
    off = ~np.eye(n, dtype=bool)
    np.testing.assert_allclose(R[off], 1.0 / np.sqrt(D[off]), rtol=2.5e-7, atol=0)
    block_rows = max(kernel_matrices.SYMMETRIC_MIN_BLOCK_ROWS, -(-n // 4))
    r1 = min(block_rows, n)  # entries below the first block are its mirror, exactly
    assert D[r1:, :r1].tobytes() == np.ascontiguousarray(D[:r1, r1:].T).tobytes()


@pytest.mark.parametrize("name", sorted(SETS))
@pytest.mark.parametrize("gamma_factor", [1.0, 0.01, 30.0])
def test_fill_is_the_float32_reference_to_the_bit(name: str, gamma_factor: float) -> None:
    X = SETS[name]
    n = X.shape[0]
    gamma = gamma_factor / (X.shape[1] * X.var())
    if (
        kernel_matrices.float32_exponent_error(X, gamma)
        > kernel_matrices.FLOAT32_EXPONENT_MAX_ERROR
    ):
        assert_float64_exponents_fill(X, gamma)  # the other branch: its own, looser reference
        return
    block_rows = max(kernel_matrices.SYMMETRIC_MIN_BLOCK_ROWS, -(-n // 4))
    D_ref, R_ref = reference(X, gamma, min(block_rows, n))
    R = np.full((n, n), np.nan)
    W = kernel_matrices.rbf_distance_matrix(X, gamma, np.empty, np.float64, True, R)
    assert W.shape == (n, 2 * n) and W.dtype == np.float64
    assert W[:, :n].tobytes() == D_ref.tobytes()
    assert W[:, n:].tobytes() == D_ref.tobytes()
    assert R.tobytes() == R_ref.tobytes()
    D64 = kernel_matrices.rbf_distance_matrix(X, gamma, dtype=np.float64)
    assert D64.shape == (n, n) and D64.tobytes() == D_ref.tobytes()
    D32 = kernel_matrices.rbf_distance_matrix(X, gamma)
    assert D32.dtype == np.float32
    off = ~np.eye(n, dtype=bool)
    assert D32[off].tobytes() == D_ref[off].astype(np.float32).tobytes()
    np.testing.assert_array_equal(np.diag(D32), HALF_TAU32)


def test_duplicated_rows_take_the_floor() -> None:
    """The duplicated sets reach the floor off the diagonal (else the floor's path goes untested)."""
    for name in ("wine_duplicated", "moons_duplicated", "one_column"):
        X = SETS[name]
        D = kernel_matrices.rbf_distance_matrix(X, 1.0 / (X.shape[1] * X.var()), dtype=np.float64)
        off = ~np.eye(X.shape[0], dtype=bool)
        assert np.count_nonzero(D[off] == HALF_TAU32) > 0, name


@pytest.mark.parametrize("block_rows", [1, 7, 64, 1000])
def test_symmetric_fill_with_a_twin_matches_the_reference(block_rows: int) -> None:
    """rbf_symmetric_fill's M and twin (separate arrays) and inverse, any block size, diagonals
    included (1 − E floored by _distances_into)."""
    X = SETS["wine_duplicated"]
    n = X.shape[0]
    gamma = 1.0 / (X.shape[1] * X.var())
    D_ref, R_ref = reference(X, gamma, min(block_rows, n), diagonals=False)
    M, twin, R = (np.full((n, n), np.nan) for _ in range(3))
    kernel_matrices.rbf_symmetric_fill(
        X, gamma, M, kernel_matrices._distances_into, block_rows, twin, R
    )
    for half in (M, twin):
        assert half.tobytes() == D_ref.tobytes()
    assert R.tobytes() == R_ref.tobytes()


def test_the_floor_bites_exactly_where_the_kernel_reaches_one() -> None:
    """float32 1 − E < τ/2 exactly where E ≥ 1, over every float32 in [1/4, 4) and the specials."""
    bits = np.arange(
        np.float32(0.25).view(np.uint32), np.float32(4.0).view(np.uint32), dtype=np.uint32
    )
    E = np.concatenate([bits.view(np.float32), np.float32([0.0, 1e-30, np.inf])])
    np.testing.assert_array_equal(np.float32(1.0) - E < HALF_TAU32, E >= 1.0)


def test_distances_off_the_diagonal_are_numpys_maximum() -> None:
    """_distances_off_diagonal: max(1 − E, τ/2) to the bit off the block's leading diagonal,
    with and without entries at or above 1 (and NaN, which stays)."""
    rng = np.random.default_rng(0)
    for case in range(4):
        E = np.exp(-rng.random((40, 60)).astype(np.float32) * 3)
        if case >= 1:
            E[rng.random((40, 60)) < 0.1] = 1.0
            E[3, 10:15] = np.nextafter(np.float32(1.0), np.float32(2.0))  # above 1
            E[4, 10] = np.nextafter(np.float32(1.0), np.float32(0.0))  # just below: not floored
        if case >= 2:
            E[5, 20] = np.nan
        if case == 3:
            E[6, 30] = np.inf
        expected = np.maximum(np.float32(1.0) - E, np.float32(0.5e-12))
        kernel_matrices._distances_off_diagonal(E, E)
        off = ~np.eye(40, 60, dtype=bool)
        assert E[off].tobytes() == expected[off].tobytes()
        if case >= 1:
            assert E[4, 10] == np.float32(2.0**-24)
