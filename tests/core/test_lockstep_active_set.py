"""Active-set rounds of many one-vs-one problems at once: each problem ends where the one-at-a-time
solver ends (the same sets, α to rounding, the same give-ups), at an exact QP optimum, within the
memory budget, and through the estimator."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_classification
from sklearn.preprocessing import StandardScaler

import bsvm_core.kernel_dual as kernel_dual
import bsvm_core.kernel_lockstep as kernel_lockstep
from bsvm_core import KernelSVM
from bsvm_core.kernel_matrices import matrix_block, rbf_distance_matrix
from bsvm_core.kernels import resolve_gamma
from bsvm_core.multiclass import binary_problems, problem_targets
from bsvm_core.solvers.active_set import active_set_solve, kkt_gap
from bsvm_core.solvers.lockstep_active_set import lockstep_active_sets
from bsvm_core.solvers.lockstep_smo import lockstep_smo
from bsvm_core.solvers.smo import SMOResult


def _problems(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, list]:
    classes, y_idx = np.unique(y, return_inverse=True)
    jobs = []
    for problem in binary_problems(classes.size, "ovo"):
        mask, y_pm = problem_targets(y_idx, problem)
        jobs.append((np.flatnonzero(mask), y_pm))
    return rbf_distance_matrix(X, resolve_gamma("scale", X)), jobs


def _data(n: int, classes: int, seed: int, flip: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n,
        12,
        n_informative=8,
        n_classes=classes,
        n_clusters_per_class=1,
        flip_y=flip,
        random_state=seed,
    )
    return StandardScaler().fit_transform(X), y


def _one_at_a_time(D, jobs, starts, C, cache_mb=200.0) -> list[SMOResult | None]:
    return [
        active_set_solve(
            matrix_block(D, True, rows),
            np.ones(rows.size),
            y_pm,
            C,
            cache_mb=cache_mb,
            start=SMOResult(alpha, 0.0, 0.0, 0, False, 0),
        )
        for (rows, y_pm), alpha in zip(jobs, starts, strict=True)
    ]


def _assert_same(batched, alone) -> None:
    assert [r is None for r in batched] == [r is None for r in alone]
    for ours, ref in zip(batched, alone, strict=True):
        if ref is None:
            continue
        assert ours.n_iter == ref.n_iter  # the same rounds
        np.testing.assert_allclose(ours.alpha, ref.alpha, rtol=0, atol=1e-9)
        assert ours.intercept == pytest.approx(ref.intercept, abs=1e-9)
        assert ours.objective == pytest.approx(ref.objective, rel=1e-12)


@pytest.mark.parametrize("C", [0.5, 10.0])
def test_after_a_probe_each_problem_ends_as_one_at_a_time(C: float) -> None:
    X, y = _data(900, 6, seed=0, flip=0.1)
    D, jobs = _problems(X, y)
    probes = lockstep_smo(D, jobs, C, steps=[r.size // 4 for r, _ in jobs])
    starts = [p.alpha for p in probes]
    batched = lockstep_active_sets(D, jobs, starts, C, 1e-3, 200.0)
    _assert_same(batched, _one_at_a_time(D, jobs, starts, C))
    assert sum(r is not None for r in batched) >= len(jobs) - 2


def test_cold_starts_take_the_damped_and_limited_rounds_of_one_at_a_time() -> None:
    """From α = 0 the seeds' first round lets many points in: the entering limit and the damping
    pick the same points by the same argpartition calls."""
    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X[:900])
    D, jobs = _problems(X, y[:900])
    starts = [np.zeros(rows.size) for rows, _ in jobs]
    batched = lockstep_active_sets(D, jobs, starts, 1.0, 1e-3, 200.0)
    _assert_same(batched, _one_at_a_time(D, jobs, starts, 1.0))
    assert max(r.n_iter for r in batched if r is not None) >= 4  # several rounds were taken


def test_solutions_are_exact_optima_of_each_dual() -> None:
    """Each problem's α meets the KKT conditions on gradients computed afresh in float64, and its
    objective matches an interior-point solution of the same QP."""
    clarabel = pytest.importorskip("clarabel")
    from scipy import sparse

    X, y = _data(400, 5, seed=1, flip=0.05)
    D, jobs = _problems(X, y)
    C = 2.0
    probes = lockstep_smo(D, jobs, C, steps=[r.size // 4 for r, _ in jobs])
    results = lockstep_active_sets(D, jobs, [p.alpha for p in probes], C, 1e-3, 200.0)
    checked = 0
    for (rows, y_pm), res in zip(jobs, results, strict=True):
        if res is None:
            continue
        K = 1.0 - D[np.ix_(rows, rows)].astype(np.float64)
        Q = K * np.outer(y_pm, y_pm)
        F = -y_pm * (Q @ res.alpha - 1.0)
        assert kkt_gap(res.alpha, F, y_pm, C) < 1e-3 + 1e-9
        m = rows.size
        P = sparse.csc_matrix(np.triu(Q))
        A = sparse.csc_matrix(np.vstack([y_pm[None, :], -np.eye(m), np.eye(m)]))
        b = np.concatenate([[0.0], np.zeros(m), np.full(m, C)])
        cones = [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(2 * m)]
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        sol = clarabel.DefaultSolver(P, -np.ones(m), A, b, cones, settings).solve()
        assert res.objective == pytest.approx(sol.obj_val, rel=1e-4)
        checked += 1
    assert checked >= len(jobs) - 1


def test_a_budget_too_small_for_the_seeds_gives_up_on_every_problem() -> None:
    X, y = _data(300, 5, seed=2)
    D, jobs = _problems(X, y)
    starts = [np.zeros(rows.size) for rows, _ in jobs]
    m = max(rows.size for rows, _ in jobs)
    tiny = 8 * len(jobs) * m * 30 / 2**20  # 30 rows a problem: fewer than the 40 seeds
    assert lockstep_active_sets(D, jobs, starts, 1.0, 1e-3, tiny) == [None] * len(jobs)


def test_a_tight_budget_gives_up_only_where_the_rows_do_not_fit() -> None:
    X, y = _data(600, 5, seed=3, flip=0.2)
    D, jobs = _problems(X, y)
    probes = lockstep_smo(D, jobs, 10.0, steps=[r.size // 4 for r, _ in jobs])
    starts = [p.alpha for p in probes]
    full = lockstep_active_sets(D, jobs, starts, 10.0, 1e-3, 200.0)
    m = max(rows.size for rows, _ in jobs)
    rows_used = sorted(r.n_kernel_rows for r in full if r is not None)
    cap = rows_used[len(rows_used) // 2]  # room for the median problem's rows
    tight = lockstep_active_sets(D, jobs, starts, 10.0, 1e-3, 8 * len(jobs) * m * cap / 2**20)
    for a, b in zip(full, tight, strict=True):
        if b is not None:
            assert b.n_kernel_rows <= cap
            np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-9)
    assert any(b is None for b in tight) and any(b is not None for b in tight)


def test_a_singular_free_set_gives_up_on_that_problem_alone() -> None:
    """Exact duplicates in one class pair make its Q_FF singular (pivot test): that problem
    returns None, as one at a time, and the others are solved."""
    X, y = _data(400, 5, seed=4)
    dup = np.flatnonzero(np.isin(y, [0, 1]))[:60]
    X = np.vstack([X, X[dup]])
    y = np.concatenate([y, y[dup]])
    D, jobs = _problems(X, y)
    starts = [np.zeros(rows.size) for rows, _ in jobs]
    batched = lockstep_active_sets(D, jobs, starts, 1e3, 1e-3, 200.0)
    alone = _one_at_a_time(D, jobs, starts, 1e3)
    _assert_same(batched, alone)
    # one-vs-one order: (0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4), then 2-4 pairs
    assert [r is None for r in batched] == [True] * 7 + [False] * 3


def test_the_estimator_resumes_smo_where_the_active_sets_give_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y = _data(700, 5, seed=5, flip=0.1)
    real = kernel_lockstep.lockstep_active_sets
    given_up = []

    def half(D, jobs, starts, *args):
        out = real(D, jobs, starts, *args)
        given_up.extend(range(0, len(out), 2))
        return [None if p % 2 == 0 else r for p, r in enumerate(out)]

    reference = KernelSVM(C=5.0).fit(X, y)
    monkeypatch.setattr(kernel_lockstep, "lockstep_active_sets", half)
    resumed = KernelSVM(C=5.0).fit(X, y)
    assert given_up
    np.testing.assert_allclose(resumed.objective_, reference.objective_, rtol=1e-3)
    assert np.mean(resumed.predict(X) == reference.predict(X)) >= 0.995


def test_a_lockstep_fit_stays_within_its_memory_estimate() -> None:
    """The float32 matrix and every problem's kept rows, traced as the fit allocates them (fresh
    buffers: none kept from an earlier fit), stay within ``estimate_fit_bytes``."""
    import tracemalloc

    from bsvm_core import workspace
    from bsvm_core.memory import estimate_fit_bytes

    X, y = load_digits(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    workspace._kept.buffers = []
    tracemalloc.start()
    try:
        KernelSVM().fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        workspace._kept.buffers = []
    assert peak > 4 * X.shape[0] ** 2  # the float32 matrix at least: the fit was traced
    assert peak <= estimate_fit_bytes(KernelSVM(), *X.shape, 10)


def test_problems_of_unequal_sizes_never_move_their_pads() -> None:
    """Classes of 30 to 240 rows: each problem is padded to the largest, and its pads stay out of
    every set (each result has its own size and matches one at a time)."""
    X, y = _data(1200, 6, seed=6, flip=0.1)
    keep = np.concatenate([np.flatnonzero(y == c)[: 30 + 42 * c] for c in range(6)])
    X, y = X[keep], y[keep]
    D, jobs = _problems(X, y)
    assert len({rows.size for rows, _ in jobs}) > 5
    probes = lockstep_smo(D, jobs, 3.0, steps=[r.size // 4 for r, _ in jobs])
    starts = [p.alpha for p in probes]
    batched = lockstep_active_sets(D, jobs, starts, 3.0, 1e-3, 200.0)
    _assert_same(batched, _one_at_a_time(D, jobs, starts, 3.0))
    solved = [(rows, r) for (rows, _), r in zip(jobs, batched, strict=True) if r is not None]
    assert len(solved) >= len(jobs) - 2
    assert all(r.alpha.size == rows.size for rows, r in solved)


def test_lockstep_pairs_from_150_rows_hand_over_and_keep_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pairs of ~170 rows (below one-at-a-time's 200) go to the active sets in a lockstep fit,
    and the model is the one-at-a-time fit's (pairs that small stay with SMO there)."""
    X, y = _data(850, 10, seed=7, flip=0.05)
    sizes = []
    real = kernel_lockstep.lockstep_active_sets

    def spy(D, jobs, *args):
        sizes.extend(rows.size for rows, _ in jobs)
        return real(D, jobs, *args)

    monkeypatch.setattr(kernel_lockstep, "lockstep_active_sets", spy)
    joint = KernelSVM(C=10.0).fit(X, y)
    assert sizes and all(
        kernel_lockstep.LOCKSTEP_ACTIVE_SET_MIN_ROWS <= s < kernel_dual.ACTIVE_SET_MIN_ROWS
        for s in sizes
    )
    monkeypatch.setattr(kernel_lockstep, "LOCKSTEP_MIN_PROBLEMS", 10**9)
    alone = KernelSVM(C=10.0).fit(X, y)
    np.testing.assert_allclose(joint.objective_, alone.objective_, rtol=1e-4)
    assert np.mean(joint.predict(X) == alone.predict(X)) >= 0.995
