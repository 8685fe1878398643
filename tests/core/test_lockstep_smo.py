"""Lockstep SMO over many one-vs-one rbf problems: each problem's solution is the one-at-a-time
SMO's and libsvm's; stopping, resuming and the estimator's choice of path."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_classification
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

import bsvm_core.kernel_lockstep as kernel_lockstep
import bsvm_core.kernel_matrices as kernel_matrices
from bsvm_core import KernelSVM
from bsvm_core.kernels import kernel_block_function, kernel_row_function, resolve_gamma
from bsvm_core.multiclass import binary_problems, problem_targets
from bsvm_core.solvers.active_set import kkt_gap
from bsvm_core.solvers.lockstep_smo import distance_matrix, lockstep_smo
from bsvm_core.solvers.smo import dual_objective, smo_solve


def _problems(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list, float]:
    classes, y_idx = np.unique(y, return_inverse=True)
    jobs = []
    for problem in binary_problems(classes.size, "ovo"):
        mask, y_pm = problem_targets(y_idx, problem)
        jobs.append((np.flatnonzero(mask), y_pm))
    gamma = resolve_gamma("scale", X)
    D = np.empty((X.shape[0], X.shape[0]), dtype=np.float32)
    kernel_block_function(X, "rbf", gamma=gamma, dtype=np.float32)(np.arange(X.shape[0]), D)
    return distance_matrix(D), jobs, gamma


def _data(n: int = 600, classes: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n, 12, n_informative=8, n_classes=classes, n_clusters_per_class=1, random_state=seed
    )
    return StandardScaler().fit_transform(X), y


@pytest.mark.parametrize("C", [0.5, 10.0])
def test_each_problem_matches_one_at_a_time_smo(C: float) -> None:
    X, y = _data()
    D, jobs, gamma = _problems(X, y)
    solved = lockstep_smo(D, jobs, C, tol=1e-3)
    assert len(solved) == len(jobs)
    for (rows, y_pm), sol in zip(jobs, solved, strict=True):
        assert sol.converged
        alone = smo_solve(
            kernel_row_function(X[rows], "rbf", gamma=gamma), np.ones(rows.size), y_pm, C
        )
        ours = dual_objective(sol.alpha, sol.grad, y_pm)
        assert ours == pytest.approx(alone.objective, rel=1e-5)
        # the state is consistent: F recomputed from α in float64 meets the stopping rule
        K = 1.0 - D[np.ix_(rows, rows)].astype(np.float64)
        F = y_pm - K @ (sol.alpha * y_pm)
        np.testing.assert_allclose(sol.grad, F, atol=1e-4)
        assert kkt_gap(sol.alpha, F, y_pm, C) < 1e-3 + 1e-4
        assert abs(float(sol.alpha @ y_pm)) < 1e-9 * max(1.0, sol.alpha.sum())
        assert np.all((sol.alpha >= 0.0) & (sol.alpha <= C))


def test_problems_of_different_sizes_leave_as_they_converge() -> None:
    X, y = _data(500, 4, seed=1)
    keep = np.flatnonzero((y != 3) | (np.arange(y.size) % 4 == 0))  # class 3 made small
    X, y = X[keep], y[keep]
    D, jobs, _ = _problems(X, y)
    sizes = {rows.size for rows, _ in jobs}
    assert len(sizes) > 1
    solved = lockstep_smo(D, jobs, 1.0)
    assert len({sol.n_iter for sol in solved}) > 1  # not all stopped at the same step
    for (rows, _), sol in zip(jobs, solved, strict=True):
        assert sol.alpha.size == rows.size and sol.converged


def test_stopped_runs_resume_to_the_same_solution() -> None:
    X, y = _data(400, 5, seed=2)
    D, jobs, _ = _problems(X, y)
    whole = lockstep_smo(D, jobs, 1.0)
    first = lockstep_smo(D, jobs, 1.0, steps=[5] * len(jobs))
    assert all(not sol.converged and sol.n_iter == 5 for sol in first)
    rest = lockstep_smo(D, jobs, 1.0, starts=first)
    for a, b in zip(whole, rest, strict=True):
        np.testing.assert_array_equal(a.alpha, b.alpha)  # the same steps, in the same order
        assert a.n_iter == b.n_iter


def test_digits_match_libsvm_through_the_estimator(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    calls = []
    real = kernel_lockstep.lockstep_smo
    monkeypatch.setattr(
        kernel_lockstep, "lockstep_smo", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    ours = KernelSVM(C=1.0).fit(X, y)
    assert calls  # the lockstep path was taken
    svc = SVC(C=1.0).fit(X, y)
    assert np.mean(ours.predict(X) == svc.predict(X)) >= 0.995
    # libsvm's dual objective of each one-vs-one problem, from its dual coefficients
    gamma = ours._gamma
    start = np.concatenate([[0], np.cumsum(svc.n_support_)])
    p = 0
    for i in range(10):
        for j in range(i + 1, 10):
            si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
            S = np.vstack([svc.support_vectors_[si], svc.support_vectors_[sj]])
            c = np.concatenate([svc.dual_coef_[j - 1, si], svc.dual_coef_[i, sj]])
            K = np.exp(-gamma * ((S[:, None, :] - S[None, :, :]) ** 2).sum(-1))
            libsvm = 0.5 * c @ K @ c - np.abs(c).sum()
            assert ours.objective_[p] == pytest.approx(libsvm, rel=1e-3)
            p += 1


@pytest.mark.parametrize(
    "params",
    [
        {"kernel": "poly"},
        {"cache_mb": 0.1},  # the 300 × 300 float32 matrix takes 0.34 MB
        {"n_jobs": 2},
        {"max_iter": 100_000},
        {"multiclass": "ovr"},
    ],
)
def test_other_fits_solve_one_problem_at_a_time(
    params: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    X, y = _data(300, 5, seed=3)
    monkeypatch.setattr(
        kernel_lockstep, "lockstep_smo", lambda *a, **k: pytest.fail("lockstep used")
    )
    KernelSVM(**params).fit(X, y)


def test_few_problems_stay_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = _data(300, 4, seed=4)  # 6 problems
    monkeypatch.setattr(
        kernel_lockstep, "lockstep_smo", lambda *a, **k: pytest.fail("lockstep used")
    )
    KernelSVM().fit(X, y)


def test_lockstep_and_one_at_a_time_give_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = _data(700, 5, seed=5)
    joint = KernelSVM(C=3.0).fit(X, y)
    monkeypatch.setattr(kernel_lockstep, "LOCKSTEP_MIN_PROBLEMS", 10**9)
    alone = KernelSVM(C=3.0).fit(X, y)
    np.testing.assert_allclose(joint.objective_, alone.objective_, rtol=1e-5)
    assert np.mean(joint.predict(X) == alone.predict(X)) >= 0.998


def test_float32_exponent_error_bounds_the_blocks() -> None:
    rng = np.random.default_rng(6)
    for scale, gamma in ((1.0, 0.05), (30.0, 0.01), (1e3, 1e-4)):
        X = rng.standard_normal((300, 16)) * scale + 5.0 * scale
        K32 = np.empty((300, 300), dtype=np.float32)
        with np.errstate(over="ignore"):
            kernel_block_function(X, "rbf", gamma=gamma, dtype=np.float32)(np.arange(300), K32)
        exact = -gamma * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
        near = exact > -30.0  # where the kernel is not negligible, compare exponents
        err = np.abs(np.log(K32[near].astype(np.float64)) - exact[near])
        bound = kernel_matrices.float32_exponent_error(X, gamma)
        assert err.max() <= bound + 1e-6  # + float32 exp and log rounding


def test_far_flung_data_with_a_large_gamma_keep_libsvm_objectives() -> None:
    """float32 products would shift k(x, x) itself by per cents here: float64 exponents are used."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((400, 5)) * 100.0
    y = rng.integers(0, 6, 400)
    ours = KernelSVM(C=100.0, gamma=10.0).fit(X, y)
    svc = SVC(C=100.0, gamma=10.0).fit(X, y)
    # the kernel is the identity to double precision: each pair's dual, ½|α|² − Σα with
    # n₊α₊ = n₋α₋, has α₊ = 2n₋/n, α₋ = 2n₊/n and the value −2n₊n₋/n
    sizes = np.bincount(y)
    expected = [
        -2.0 * sizes[i] * sizes[j] / (sizes[i] + sizes[j])
        for i in range(6)
        for j in range(i + 1, 6)
    ]
    np.testing.assert_allclose(ours.objective_, expected, rtol=1e-6)
    assert np.mean(ours.predict(X) == svc.predict(X)) >= 0.995


def test_close_pairs_far_from_the_centre_take_float64_exponents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """γ‖x‖² ≈ 2e4 but γ‖x − x'‖² ≈ 1 within each pair: float32 products would move those
    kernel values by per cents; the lockstep fit matches one-at-a-time SMO's float64 rows."""
    rng = np.random.default_rng(8)
    base = rng.standard_normal((200, 4)) * 100.0
    X = np.vstack([base, base + rng.standard_normal((200, 4)) * 0.7])
    y = np.tile(rng.integers(0, 5, 200), 2)
    y[200:] = (y[200:] + rng.integers(0, 2, 200)) % 5  # a pair's two points may disagree
    assert (
        kernel_matrices.float32_exponent_error(X, 0.5) > kernel_matrices.FLOAT32_EXPONENT_MAX_ERROR
    )
    joint = KernelSVM(C=10.0, gamma=0.5).fit(X, y)
    monkeypatch.setattr(kernel_lockstep, "LOCKSTEP_MIN_PROBLEMS", 10**9)
    alone = KernelSVM(C=10.0, gamma=0.5).fit(X, y)
    np.testing.assert_allclose(joint.objective_, alone.objective_, rtol=1e-5)


@pytest.mark.parametrize("seed", range(8))
def test_random_sets_match_one_at_a_time(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Duplicates, skewed classes, scales from 0.01 to 100, gamma up to 10, C from 0.1 to 100."""
    rng = np.random.default_rng(100 + seed)
    k, n, d = int(rng.integers(5, 8)), int(rng.integers(150, 500)), int(rng.integers(1, 12))
    X = rng.standard_normal((n, d)) * float(rng.choice([0.01, 1.0, 100.0]))
    if seed % 3 == 0:
        X[: n // 3] = X[0]  # a third of the rows on one point, of every class
    y = (
        rng.choice(k, n, p=np.r_[0.6, [0.4 / (k - 1)] * (k - 1)])
        if seed % 2
        else rng.integers(0, k, n)
    )
    assert np.unique(y).size >= 5  # ten problems or more: the lockstep path
    params = {"C": float(rng.choice([0.1, 1.0, 100.0])), "gamma": rng.choice(["scale", 0.01, 10.0])}
    params["gamma"] = params["gamma"] if params["gamma"] == "scale" else float(params["gamma"])
    joint = KernelSVM(**params).fit(X, y)
    monkeypatch.setattr(kernel_lockstep, "LOCKSTEP_MIN_PROBLEMS", 10**9)
    alone = KernelSVM(**params).fit(X, y)
    scale = np.maximum(np.abs(alone.objective_), 1e-9)
    assert np.max(np.abs(joint.objective_ - alone.objective_) / scale) < 1e-3
    assert np.mean(joint.predict(X) == alone.predict(X)) >= 0.99


def test_blocks_beyond_the_cache_go_a_few_problems_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``cache_mb`` that holds D but not every problem's block: the problems go through the
    lockstep in several calls (a few blocks each) and the model is the one of a roomy cache."""
    X, y = _data(600, 5, seed=9)
    roomy = KernelSVM(C=1.0).fit(X, y)
    n = X.shape[0]
    calls = []
    real = kernel_lockstep.lockstep_smo
    monkeypatch.setattr(
        kernel_lockstep,
        "lockstep_smo",
        lambda D, jobs, *a, **k: calls.append(len(jobs)) or real(D, jobs, *a, **k),
    )
    tight = KernelSVM(C=1.0, cache_mb=(4 * n * n + 3 * 4 * 260**2) / 2**20).fit(X, y)
    assert len(calls) >= 3 and max(calls) < 10  # several calls, none with all ten problems
    np.testing.assert_allclose(tight.objective_, roomy.objective_, rtol=1e-5)
    assert np.mean(tight.predict(X) == roomy.predict(X)) >= 0.998
