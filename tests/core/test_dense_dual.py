"""Small binary problems on a dense kernel matrix: exact optimum (interior point), the row path,
the matrix itself, and when the path is taken."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler

from bsvm_core import kernel_dual, kernel_matrices
from bsvm_core.kernels import kernel_matrix

from .test_smo import clarabel_dual

KW = {
    "rbf": {"gamma": 0.05, "degree": 3, "coef0": 0.0},
    "linear": {"gamma": 1.0, "degree": 3, "coef0": 0.0},
    "poly": {"gamma": 0.1, "degree": 2, "coef0": 1.0},
    "sigmoid": {"gamma": 0.01, "degree": 3, "coef0": 0.0},
}


def data(n: int = 240, d: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(n, d, n_informative=6, flip_y=0.1, random_state=seed)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


def solve(X, y, kernel, C, max_iter=None, cache_mb=200.0):
    return kernel_dual.solve_dual(X, y, C, kernel, KW[kernel], 1e-3, max_iter, cache_mb)


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
@pytest.mark.parametrize("C", [1.0, 10.0])
def test_dense_path_reaches_the_exact_optimum_and_the_row_path(monkeypatch, kernel, C) -> None:
    X, y = data()
    dense = solve(X, y, kernel, C)
    assert dense.converged and dense.n_kernel_rows == y.size  # the matrix was made
    with monkeypatch.context() as m:
        m.setattr(kernel_dual, "DENSE_MAX_ROWS", 0)
        rows = solve(X, y, kernel, C)
    assert rows.n_kernel_rows < y.size or kernel == "sigmoid"
    K = kernel_matrix(X, X, kernel, **KW[kernel])
    if kernel != "sigmoid":  # the sigmoid Gram matrix is indefinite: no convex reference
        exact = clarabel_dual(K, y, C)
        assert dense.objective == pytest.approx(exact, rel=1e-3)
    assert dense.objective == pytest.approx(rows.objective, rel=1e-4)
    alpha = dense.alpha
    assert abs(float(y @ alpha)) < 1e-8 and alpha.min() >= 0.0 and alpha.max() <= C
    # the reported objective is the problem's, recomputed with the float64 Gram matrix
    Q = (y[:, None] * y[None, :]) * K
    assert 0.5 * alpha @ Q @ alpha - alpha.sum() == pytest.approx(dense.objective, rel=1e-5)


def test_dense_path_with_max_iter_stops_there() -> None:
    X, y = data()
    res = solve(X, y, "rbf", 10.0, max_iter=5)
    assert not res.converged and res.n_iter == 5


@pytest.mark.parametrize("shift", [0.0, 1e4])
def test_dense_rbf_matrix_is_one_minus_the_kernel_with_an_exact_diagonal(shift) -> None:
    X = load_breast_cancer().data[:300]
    X = StandardScaler().fit_transform(X) + shift  # far from the origin: centring keeps it exact
    gamma = 1.0 / (X.shape[1] * X.var())
    for gamma_used in (gamma, 50 * gamma):  # the second one fails the float32 bound
        D = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma_used})
        assert D.dtype == np.float64
        np.testing.assert_array_equal(np.diag(D), 0.5e-12)  # k(x, x) = 1 exactly
        assert D.min() >= 0.5e-12  # half curvatures: never below tau / 2
        np.testing.assert_allclose(1.0 - D, rbf_kernel(X, gamma=gamma_used), atol=1e-5)


@pytest.mark.parametrize("kernel", ["linear", "poly", "sigmoid"])
def test_dense_matrix_of_other_kernels_is_float64_exact(kernel) -> None:
    X, _ = data(60)
    K = kernel_matrices.dense_kernel_matrix(X, kernel, KW[kernel])
    np.testing.assert_allclose(K, kernel_matrix(X, X, kernel, **KW[kernel]), rtol=1e-12)


def test_when_the_dense_path_applies() -> None:
    n = kernel_dual.DENSE_MAX_ROWS
    assert kernel_dual.dense_applies(n, "rbf", 200.0)
    assert not kernel_dual.dense_applies(n + 1, "rbf", 200.0)
    assert kernel_dual.dense_applies(n, "rbf", 8 * n * n / 2**20)
    assert not kernel_dual.dense_applies(n, "rbf", 8 * n * n / 2**20 - 1)  # over the budget
    assert not kernel_dual.dense_applies(10, lambda a, b: a @ b.T, 200.0)


def test_small_cache_takes_the_row_path() -> None:
    X, y = data(400)
    res = solve(X, y, "rbf", 1.0, cache_mb=1.0)  # 8 n² bytes = 1.2 MB > 1 MB
    assert res.converged and res.n_kernel_rows < y.size


@pytest.mark.parametrize("block_rows", [1, 7, 64, 1000])
@pytest.mark.parametrize("gamma_factor", [1.0, 50.0])  # 50: float64 exponents (float32 bound)
def test_symmetric_fill_is_the_full_matrix(block_rows, gamma_factor) -> None:
    X = StandardScaler().fit_transform(load_breast_cancer().data[:150]) + 1e3
    gamma = gamma_factor / (X.shape[1] * X.var())
    M = np.full((150, 150), np.nan)
    kernel_matrices.rbf_symmetric_fill(
        X, gamma, M, lambda E, out: np.copyto(out, E), block_rows=block_rows
    )
    assert np.isfinite(M).all()  # every entry written (upper triangle, or mirrored)
    np.testing.assert_allclose(M, rbf_kernel(X, gamma=gamma), atol=2e-5)


def test_lockstep_distance_matrix_is_one_minus_the_kernel() -> None:
    X = StandardScaler().fit_transform(load_breast_cancer().data[:200])
    gamma = 1.0 / (X.shape[1] * X.var())
    D = kernel_matrices.rbf_distance_matrix(X, gamma)
    assert D.dtype == np.float32
    np.testing.assert_array_equal(np.diag(D), np.float32(0.5e-12))  # k(x, x) = 1: D = τ/2
    np.testing.assert_allclose(D, np.maximum(1.0 - rbf_kernel(X, gamma=gamma), 0.5e-12), atol=1e-5)


def test_distance_floor_is_numpys_maximum() -> None:
    """The floor τ/2 set where 1 − K falls below it (diagonal, duplicated rows, rounding above 1)
    leaves the block np.maximum(1 − K, τ/2) would make, to the bit."""
    rng = np.random.default_rng(0)
    E = np.exp(-rng.random((40, 60)).astype(np.float32) * 3)
    E[rng.random((40, 60)) < 0.1] = 1.0
    E[0, :5] = np.nextafter(np.float32(1.0), np.float32(2.0))  # above 1: 1 − E < 0
    expected = np.maximum(np.float32(1.0) - E, np.float32(0.5e-12))
    kernel_matrices._distances_into(E, E)
    assert E.tobytes() == expected.tobytes()
    assert np.count_nonzero(np.equal(E, np.float32(0.5e-12))) > 100


@pytest.mark.parametrize("C", [1.0, 10.0, np.inf])
def test_smo_on_distances_takes_the_steps_of_smo_on_the_kernel(C) -> None:
    """D = 1 − K rows (the gradient's common shift kept aside) give the same α as K rows."""
    from bsvm_core.solvers.kernel_cache import DenseKernelRows
    from bsvm_core.solvers.smo import smo_solve

    X, y = data(200)
    if np.isinf(C):  # separable in feature space: a large gamma
        KW_hard = {"gamma": 2.0}
        D = kernel_matrices.dense_kernel_matrix(X, "rbf", KW_hard)
    else:
        D = kernel_matrices.dense_kernel_matrix(X, "rbf", KW["rbf"])
    K = 1.0 - D
    np.fill_diagonal(K, 1.0)
    ones = np.ones(y.size)
    on_d = smo_solve(
        None, ones, y, C, cache=DenseKernelRows(D, distances=True), floor_curvature=False
    )
    on_k = smo_solve(None, ones, y, C, cache=DenseKernelRows(K), floor_curvature=False)
    assert on_d.n_iter == on_k.n_iter
    np.testing.assert_allclose(on_d.alpha, on_k.alpha, atol=1e-9)
    np.testing.assert_allclose(on_d.grad, on_k.grad, atol=1e-9)  # the shift added back
    assert on_d.intercept == pytest.approx(on_k.intercept, abs=1e-9)
    assert on_d.objective == pytest.approx(on_k.objective, rel=1e-10)


@pytest.mark.parametrize("block_rows", [1, 7, 64, 1000])
def test_fill_gives_the_inverse_root_of_the_distances(block_rows) -> None:
    """The fill's ``inverse`` is 1 / √D of the same D (float32 sqrt and reciprocal: within
    2.5e-7 relative of float64's), every entry written, and the diagonal (τ/2)^(−1/2) exactly."""
    X = StandardScaler().fit_transform(load_breast_cancer().data[:150])
    gamma = 1.0 / (X.shape[1] * X.var())
    R = np.full((150, 150), np.nan)
    W = kernel_matrices.rbf_distance_matrix(X, gamma, dtype=np.float64, doubled=True, inverse=R)
    D = W[:, :150]
    np.testing.assert_array_equal(
        D, kernel_matrices.rbf_distance_matrix(X, gamma, dtype=np.float64)
    )
    np.testing.assert_array_equal(np.diag(R), 1.0 / np.sqrt(0.5e-12))
    np.testing.assert_allclose(R, 1.0 / np.sqrt(D), rtol=2.5e-7, atol=0.0)
    M, R2 = np.full((150, 150), np.nan), np.full((150, 150), np.nan)
    kernel_matrices.rbf_symmetric_fill(
        X, gamma, M, kernel_matrices._distances_into, block_rows=block_rows, inverse=R2
    )
    off = ~np.eye(150, dtype=bool)
    np.testing.assert_allclose(R2[off], 1.0 / np.sqrt(M[off]), rtol=2.5e-7, atol=0.0)


@pytest.mark.parametrize("C", [1.0, 10.0])
def test_shared_matrix_with_the_filled_inverse_meets_rows_made_as_needed(monkeypatch, C) -> None:
    """One-vs-one pairs and a problem of all rows on the shared [D | D] with all of D^(−1/2) from
    the fill (float32 rounding may only break near ties of WSS3's j otherwise) reach the
    objectives of rows made as SMO needs them and of the exact optimum."""
    X, y3 = make_classification(
        300,
        3,
        n_informative=3,
        n_redundant=0,
        n_classes=3,
        n_clusters_per_class=1,
        flip_y=0.1,
        random_state=1,
    )
    X = StandardScaler().fit_transform(X)
    assert kernel_dual.doubled_applies(300, 3, "rbf", C, None, 200.0)
    assert kernel_dual.filled_inverse_applies(300, 200.0)
    problems = [(np.ones(300, dtype=bool), np.where(y3 == 1, 1.0, -1.0))]  # one-vs-rest's
    for a, b in ((0, 1), (0, 2), (1, 2)):
        mask = (y3 == a) | (y3 == b)
        problems.append((mask, np.where(y3[mask] == a, 1.0, -1.0)))

    def shared():
        return kernel_dual.solve_on_shared_matrix(
            X, problems, C, "rbf", KW["rbf"], 1e-3, None, 200.0
        )

    filled_with = []  # the fill's inverse argument, a call each

    def spy(*args, inverse=None, **kwargs):
        filled_with.append(inverse is not None)
        return kernel_matrices.dense_kernel_matrix(*args, inverse=inverse, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(kernel_dual, "dense_kernel_matrix", spy)
        filled = shared()
    assert filled_with == [True]
    with monkeypatch.context() as m:
        m.setattr(kernel_dual, "FILLED_INVERSE_MAX_ROWS", 0)
        as_needed = shared()
    K = kernel_matrix(X, X, "rbf", **KW["rbf"])
    for res, ref, (mask, y_pm) in zip(filled, as_needed, problems, strict=True):
        assert res.converged and ref.converged
        assert res.objective == pytest.approx(ref.objective, rel=1e-6)
        exact = clarabel_dual(K[np.ix_(mask, mask)], y_pm, C)
        assert res.objective == pytest.approx(exact, rel=1e-3)


@pytest.mark.parametrize(
    ("seed", "C", "active_sets"),
    [(0, 0.1, None), (0, 1.0, None), (0, 10.0, False), (1, 10.0, True), (0, 100.0, True)],
)
def test_probe_on_the_doubled_matrix(monkeypatch, seed, C, active_sets) -> None:
    """A problem of a few hundred rows that starts with the active sets' probe runs it on
    [D | D]: SMO goes on there when it does not hand over (C = 0.1, 1), resumes there when the
    active sets give up (seed 0, C = 10), and the active sets read D's rows from it. Each reaches
    the exact optimum and an objective at least as low as the probe on D (within 1e-7 of it)."""
    X, y = data(n=300, seed=seed)
    assert kernel_dual.doubled_probe_applies(y.size, X.shape[1], "rbf", C, None, 200.0)
    assert not kernel_dual.doubled_applies(y.size, X.shape[1], "rbf", C, None, 200.0)
    doubled, handed = [], []
    smo_doubled, sets = kernel_dual._smo_doubled, kernel_dual.active_set_solve

    def doubled_spy(*args, **kwargs):
        doubled.append("start" if "start" in kwargs else "probe")
        return smo_doubled(*args, **kwargs)

    def sets_spy(*args, **kwargs):
        res = sets(*args, **kwargs)
        handed.append(res is not None)
        return res

    with monkeypatch.context() as m:
        m.setattr(kernel_dual, "_smo_doubled", doubled_spy)
        m.setattr(kernel_dual, "active_set_solve", sets_spy)
        res = solve(X, y, "rbf", C)
    assert handed == ([] if active_sets is None else [active_sets])
    assert doubled == (["probe", "start"] if active_sets is False else ["probe"])
    with monkeypatch.context() as m:
        m.setattr(kernel_dual, "DOUBLED_PROBE_MAX_ROWS", 0)  # the probe on D
        on_d = solve(X, y, "rbf", C)
    assert res.converged and on_d.converged
    exact = clarabel_dual(kernel_matrix(X, X, "rbf", **KW["rbf"]), y, C)
    assert res.objective == pytest.approx(exact, rel=1e-3)
    assert res.objective <= on_d.objective + 1e-7 * abs(on_d.objective)
    alpha = res.alpha
    assert abs(float(y @ alpha)) < 1e-8 and alpha.min() >= 0.0 and alpha.max() <= C
    assert res.n_kernel_rows == y.size


def test_when_the_probe_runs_on_the_doubled_matrix() -> None:
    top = kernel_dual.DOUBLED_PROBE_MAX_ROWS
    assert top <= kernel_dual.DOUBLED_MAX_ROWS
    assert kernel_dual.doubled_probe_applies(top, 10, "rbf", 1.0, None, 200.0)
    assert not kernel_dual.doubled_probe_applies(top + 1, 10, "rbf", 1.0, None, 200.0)
    low = kernel_dual.ACTIVE_SET_MIN_ROWS
    assert kernel_dual.doubled_probe_applies(low, 10, "rbf", 1.0, None, 200.0)
    assert not kernel_dual.doubled_probe_applies(low - 1, 10, "rbf", 1.0, None, 200.0)  # SMO alone
    assert not kernel_dual.doubled_probe_applies(300, 5, "rbf", 1.0, None, 200.0)  # SMO alone
    assert not kernel_dual.doubled_probe_applies(300, 10, "poly", 1.0, None, 200.0)
    assert not kernel_dual.doubled_probe_applies(300, 10, "rbf", np.inf, None, 200.0)
    assert not kernel_dual.doubled_probe_applies(300, 10, "rbf", 1.0, 50, 200.0)
    assert not kernel_dual.doubled_probe_applies(300, 10, "rbf", 1.0, None, 1.3)
