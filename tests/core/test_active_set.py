"""The primal-dual active-set solver: exact optimum (interior point), KKT, libsvm, its fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_classification
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core import kernel_dual, kernel_lockstep
from bsvm_core.exceptions import NotSeparableError
from bsvm_core.kernel_svm import KernelSVM
from bsvm_core.kernels import (
    kernel_block_function,
    kernel_diagonal,
    kernel_matrix,
    kernel_row_function,
)
from bsvm_core.solvers import active_set
from bsvm_core.solvers.active_set import active_set_solve
from bsvm_core.solvers.smo import SMOResult, smo_solve

from .test_smo import clarabel_dual, problem

ARGS = {"gamma": 0.1, "degree": 2, "coef0": 1.0}


def wide_problem(n: int = 150, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """10 features, noisy labels (on 3-feature problems the rounds often cycle: see fallbacks)."""
    X, y = make_classification(n_samples=n, n_features=10, flip_y=0.1, random_state=seed)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


def solve(X: np.ndarray, y: np.ndarray, kernel: str, C: float, **kw: object) -> SMOResult | None:
    return active_set_solve(
        kernel_block_function(X, kernel, **ARGS, dtype=np.float64),
        kernel_diagonal(X, kernel, **ARGS),
        y,
        C,
        **kw,
    )


@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_objective_matches_interior_point(C: float, seed: int) -> None:
    X, y = wide_problem(seed=seed)
    res = solve(X, y, "rbf", C, tol=1e-8)
    assert res is not None and res.converged
    K = kernel_matrix(X, X, "rbf", **ARGS)
    assert res.objective == pytest.approx(clarabel_dual(K, y, C), rel=1e-7)


def test_kkt_conditions_and_intercept() -> None:
    X, y = wide_problem(seed=2)
    C, tol = 2.0, 1e-3
    res = solve(X, y, "rbf", C, tol=tol)
    assert res is not None
    K = kernel_matrix(X, X, "rbf", **ARGS)
    a = res.alpha
    assert np.all(a >= 0.0) and np.all(a <= C)
    assert abs(float(a @ y)) < 1e-10
    Q = y[:, None] * y[None, :] * K
    F = -y * (Q @ a - 1.0)  # −y∘∇f from scratch
    up = ((y > 0) & (a < C)) | ((y < 0) & (a > 0))
    low = ((y > 0) & (a > 0)) | ((y < 0) & (a < C))
    assert F[up].max() - F[low].min() < tol
    assert res.objective == pytest.approx(0.5 * a @ Q @ a - a.sum(), rel=1e-12)
    free = (a > 0) & (a < C)
    assert free.any()
    margins = y[free] * (K[free] @ (a * y) + res.intercept)
    np.testing.assert_allclose(margins, 1.0, atol=1e-8)  # exact on the free set


def test_rbf_float32_blocks_match_float64() -> None:
    X, y = wide_problem(n=200, seed=3)
    exact = solve(X, y, "rbf", 1.0, tol=1e-6)
    fast = active_set_solve(
        kernel_block_function(X, "rbf", **ARGS, dtype=np.float32),
        np.ones(y.size),
        y,
        1.0,
        tol=1e-6,
        block_dtype=np.float32,
    )
    assert exact is not None and fast is not None
    assert fast.objective == pytest.approx(exact.objective, rel=1e-5)


def test_gives_up_on_a_singular_kernel() -> None:
    X, y = problem(n=120)
    assert solve(X, y, "linear", 1.0) is None  # rank 3: Q_FF of 40 seed points is singular
    dup = np.vstack([X, X])
    assert solve(dup, np.r_[y, y], "rbf", 1.0) is None  # duplicated rows: equal kernel rows


def test_gives_up_after_max_rounds_and_on_a_small_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = wide_problem()
    assert solve(X, y, "rbf", 1.0, cache_mb=8 * 150 * 30 / 2**20) is None  # 30 rows only
    assert solve(X, y, "rbf", 1.0) is not None
    monkeypatch.setattr(active_set, "MAX_ROUNDS", 1)
    assert solve(X, y, "rbf", 1.0) is None


class Spy:
    """Wraps active_set_solve in kernel_dual and records what it returned."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.results: list[SMOResult | None] = []
        monkeypatch.setattr(kernel_dual, "active_set_solve", self)

    def __call__(self, *args: object, **kwargs: object) -> SMOResult | None:
        res = active_set_solve(*args, **kwargs)
        self.results.append(res)
        return res


def test_estimator_resumes_smo_when_it_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = wide_problem(n=300)  # linear kernel, 10 features: Q_FF singular beyond 10 free points
    spy = Spy(monkeypatch)
    est = KernelSVM(kernel="linear", C=1.0).fit(X, y)
    assert spy.results == [None]
    assert est.n_iter_[0] > 300 // kernel_dual.PROBE_FRACTION  # SMO went on from the probe
    monkeypatch.setattr(kernel_dual, "ACTIVE_SET_MAX_ROWS", 0)
    plain = KernelSVM(kernel="linear", C=1.0).fit(X, y)  # SMO alone, from α = 0
    assert est.objective_[0] == pytest.approx(plain.objective_[0], rel=1e-6)
    ref = SVC(kernel="linear", C=1.0).fit(X, y)
    assert np.mean(est.predict(X) == ref.predict(X)) >= 0.99


@pytest.mark.parametrize("shape", [(120, 10), (300, 3)])
def test_estimator_leaves_small_and_low_dimensional_problems_to_smo(
    shape: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    n, d = shape
    X, y = make_classification(n_samples=n, n_features=d, n_informative=2, n_redundant=0)
    spy = Spy(monkeypatch)
    est = KernelSVM(C=100.0).fit(X, y)
    assert spy.results == []
    assert est.n_iter_[0] > n // kernel_dual.PROBE_FRACTION  # no probe cut it short


def test_warm_start_from_a_short_smo_run_reaches_the_optimum() -> None:
    X, y = wide_problem(n=250, seed=4)
    C = 10.0
    probe = smo_solve(
        kernel_row_function(X, "rbf", **ARGS), np.ones(y.size), y, C, tol=1e-8, max_iter=40
    )
    assert not probe.converged
    res = solve(X, y, "rbf", C, tol=1e-8, start=probe)
    assert res is not None and res.converged
    cold = solve(X, y, "rbf", C, tol=1e-8)
    assert cold is not None and res.n_iter < cold.n_iter
    K = kernel_matrix(X, X, "rbf", **ARGS)
    assert res.objective == pytest.approx(clarabel_dual(K, y, C), rel=1e-7)


@pytest.mark.parametrize(
    "params",
    [{"kernel": "sigmoid", "gamma": 0.05}, {"C": float("inf")}, {"max_iter": 10_000}],
)
def test_estimator_routes_to_smo(params: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(40, 2)) - 3.0, rng.normal(size=(40, 2)) + 3.0])
    y = np.r_[np.zeros(40), np.ones(40)]
    spy = Spy(monkeypatch)
    est = KernelSVM(**params).fit(X, y)  # separable: C = inf has a solution
    assert spy.results == []
    assert est.score(X, y) == 1.0
    if params.get("C") == float("inf"):
        X, y = np.vstack([X, X[:1]]), np.r_[y, 1.0]  # a point with both labels: not separable
        with pytest.raises(NotSeparableError):
            KernelSVM(**params).fit(X, y)
        assert spy.results == []


def test_digits_one_vs_one_uses_it_and_agrees_with_libsvm(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    results: list = []
    batched = kernel_lockstep.lockstep_active_sets

    def spy(*args: object) -> list:
        out = batched(*args)
        results.extend(out)
        return out

    monkeypatch.setattr(kernel_lockstep, "lockstep_active_sets", spy)
    ours = KernelSVM().fit(X, y)
    assert len(results) == 45 and all(r is not None for r in results)  # all 45, in lockstep
    ref = SVC().fit(X, y)
    assert np.mean(ours.predict(X) == ref.predict(X)) >= 0.995


def test_rank_at_least_sees_linearly_dependent_features() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 10)) * np.logspace(0, 3, 10)  # full rank, uneven scales
    assert kernel_dual.rank_at_least(X, 8) and kernel_dual.rank_at_least(X, 10)
    dependent = np.c_[X[:, :5], X[:, :5] @ rng.normal(size=(5, 5))]  # rank 5
    assert kernel_dual.rank_at_least(dependent, 5)
    assert not kernel_dual.rank_at_least(dependent, 6)
    assert not kernel_dual.rank_at_least(X[:7], 8)  # 7 rows
    shifted = dependent + 100.0  # a constant offset adds no dimension once centred
    assert not kernel_dual.rank_at_least(shifted, 6)


def test_probe_rows_and_active_set_rows_share_one_cache_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe's row cache stays alive for a resumed SMO, so the active sets get what is left
    of ``cache_mb``; on a budget the probe has mostly used, they give up and SMO finishes."""
    X, y = make_classification(600, 20, n_informative=10, flip_y=0.2, random_state=3)
    X = StandardScaler().fit_transform(X)
    budgets: list[float] = []
    solve = kernel_dual.active_set_solve

    def spy(*args: object, **kwargs: object) -> object:
        budgets.append(float(kwargs["cache_mb"]))  # type: ignore[arg-type]
        return solve(*args, **kwargs)

    monkeypatch.setattr(kernel_dual, "active_set_solve", spy)
    for cache_mb in (200.0, 1.0):
        model = KernelSVM(C=100.0, cache_mb=cache_mb).fit(X, y)
        reference = SVC(C=100.0, kernel="rbf", gamma="scale").fit(X, y)
        assert np.mean(model.predict(X) == reference.predict(X)) >= 0.995
    assert len(budgets) == 2
    assert 0.0 < budgets[0] < 200.0  # the probe's rows were taken off
    assert 0.0 <= budgets[1] < 1.0


def test_row_cache_counts_only_filled_rows() -> None:
    from bsvm_core.solvers.kernel_cache import KernelRowCache

    cache = KernelRowCache(lambda i, out: out.fill(float(i)), 100, 1.0)
    assert cache.nbytes == 0
    cache.row(3)
    cache.row(7)
    cache.row(3)
    assert cache.nbytes == 2 * 100 * 8


def test_newton_step_in_z_is_the_newton_step_of_alpha() -> None:
    """K_FF z + b e = y∘rhs, eᵀz = c (z = y∘α) against the bordered system of Q_FF solved
    directly and against ``newton_step`` on Q_FF = y yᵀ∘K_FF."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 6))
    K = np.exp(-0.2 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    y = np.where(rng.random(40) < 0.5, 1.0, -1.0)
    rhs, c = rng.normal(size=40), 0.7
    Q = (y[:, None] * y[None, :]) * K
    A = np.block([[Q, y[:, None]], [y[None, :], np.zeros((1, 1))]])
    direct = np.linalg.solve(A, np.r_[rhs, c])
    z, b = active_set.newton_step_kernel(K.copy(), y * rhs, c)
    alpha, b_alpha = active_set.newton_step(Q.copy(), rhs, y, c)
    np.testing.assert_allclose(y * z, direct[:-1], rtol=1e-8, atol=1e-10)
    assert b == pytest.approx(direct[-1], rel=1e-8, abs=1e-10)
    np.testing.assert_allclose(y * z, alpha, rtol=1e-10, atol=1e-12)
    assert b == pytest.approx(b_alpha, rel=1e-10, abs=1e-12)
    dup = K[np.ix_([0, 0, 1, 2], [0, 0, 1, 2])]  # a point twice: fails the pivot test
    assert active_set.newton_step_kernel(dup, np.ones(4), 0.0) is None


def test_rounds_read_the_kept_rows_of_points_that_left_their_sets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A round reads the kept rows in place (K_FF and the sum over U from F's columns, the decision
    values from all kept rows): rows of points that left F for 0, or U for F, stay kept with other
    coefficients. The result is the exact optimum (Clarabel) and meets the KKT conditions from
    scratch, and this problem's rounds do move points out of F and out of U."""
    X, y = wide_problem(n=300, seed=5)
    C = 1.0
    probe = smo_solve(
        kernel_row_function(X, "rbf", **ARGS), np.ones(y.size), y, C, tol=1e-8, max_iter=60
    )
    assert not probe.converged
    frees: list[np.ndarray] = []
    ensure = active_set.KernelRowStore.ensure

    def spy(store: active_set.KernelRowStore, idx: np.ndarray) -> bool:
        frees.append(idx.copy())  # U's rows first, then each round's F
        return ensure(store, idx)

    monkeypatch.setattr(active_set.KernelRowStore, "ensure", spy)
    res = solve(X, y, "rbf", C, tol=1e-8, start=probe)
    assert res is not None and res.converged and res.n_iter >= 3
    a = res.alpha
    ever_free = np.unique(np.concatenate(frees[1:]))
    assert np.any(a[ever_free] == 0.0)  # free in some round, at 0 at the end: rows kept, weight 0
    started_at_C = np.flatnonzero(probe.alpha >= C)
    assert np.intersect1d(started_at_C, ever_free).size  # left U for F in some round
    K = kernel_matrix(X, X, "rbf", **ARGS)
    assert res.objective == pytest.approx(clarabel_dual(K, y, C), rel=1e-7)
    F = y - K @ (a * y)  # −y∘∇f from scratch
    up = ((y > 0) & (a < C)) | ((y < 0) & (a > 0))
    low = ((y > 0) & (a > 0)) | ((y < 0) & (a < C))
    assert F[up].max() - F[low].min() < 1e-8
    Q = y[:, None] * y[None, :] * K
    assert res.objective == pytest.approx(0.5 * a @ Q @ a - a.sum(), rel=1e-12)
