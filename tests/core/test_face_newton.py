"""Newton steps on SMO's free face (``solvers.face_newton``, ``smo_solve_distances(newton=True)``):
one step against the face's minimiser solved directly, a blocked step's feasibility and descent,
the whole solver against the exact optimum (interior point) and plain SMO at several C, and the
continuation of a blocked step against its plain formulation, to the bit."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.linalg.blas import daxpy, dger
from scipy.linalg.lapack import dpotrf, dpotrs
from sklearn.datasets import load_wine, make_classification, make_moons
from sklearn.preprocessing import StandardScaler

from bsvm_core import kernel_matrices
from bsvm_core.solvers import face_newton, smo_distances
from bsvm_core.solvers.face_newton import RIDGE, face_newton_step
from bsvm_core.solvers.smo_distances import smo_solve_distances

from .test_smo import clarabel_dual


def problem(name: str) -> tuple[np.ndarray, np.ndarray, float]:
    """(X, ±1 targets, gamma) of a small rbf problem."""
    if name == "moons":  # two features: a numerically low-rank Gram matrix
        X, y = make_moons(300, noise=0.3, random_state=0)
    elif name == "wine":  # classes 0 and 1 of wine: separable, no α at C for large C
        X, y = load_wine(return_X_y=True)
        X, y = X[y < 2], y[y < 2]
    else:
        X, y = make_classification(200, 10, n_informative=6, flip_y=0.1, random_state=0)
    X = StandardScaler().fit_transform(X)
    return X, np.where(y == 1, 1.0, -1.0), 1.0 / (X.shape[1] * X.var())


def kernel_of(W: np.ndarray) -> np.ndarray:
    """K = 1 − D with K_ii = 1, from [D | D]."""
    n = W.shape[0]
    K = 1.0 - W[:, :n]
    np.fill_diagonal(K, 1.0)
    return K


def objective(alpha: np.ndarray, y: np.ndarray, K: np.ndarray) -> float:
    Q = (y[:, None] * y[None, :]) * K
    return 0.5 * float(alpha @ Q @ alpha) - float(alpha.sum())


def gap(alpha: np.ndarray, y: np.ndarray, K: np.ndarray, C: float) -> float:
    """m(α) − M(α) from a fresh gradient (Keerthi et al. 2001)."""
    F = y - (y * alpha) @ K  # F = −y∘∇f = y − y∘(Qα) = y − K(y∘α)
    pos = y > 0
    up = (pos & (alpha < C)) | (~pos & (alpha > 0.0))
    low = (pos & (alpha > 0.0)) | (~pos & (alpha < C))
    return float(F[up].max() - F[low].min())


def interior_point(y: np.ndarray, C: float, free: np.ndarray, seed: int) -> np.ndarray:
    """A feasible α (yᵀα = 0) with α_F strictly inside (0.3C, 0.7C) and α = 0 elsewhere."""
    rng = np.random.default_rng(seed)
    alpha = np.zeros(y.size)
    alpha[free] = C * rng.uniform(0.3, 0.7, free.size)
    excess = float(y @ alpha)  # remove it on the free points of the class that holds it
    side = free[y[free] == np.sign(excess)]
    alpha[side] -= excess * y[side] / side.size
    assert abs(float(y @ alpha)) < 1e-12 and alpha[free].min() > 0.0
    return alpha


def assert_a_descent_step(
    alpha: np.ndarray,
    free: np.ndarray,
    new_F: np.ndarray,
    dF: np.ndarray,
    F: np.ndarray,
    y: np.ndarray,
    K: np.ndarray,
    C: float,
) -> None:
    """The step's α_F lie in the box, keep yᵀα = 0, lower the objective, and ΔF is F's change."""
    assert new_F.min() >= 0.0 and new_F.max() <= C
    moved = alpha.copy()
    moved[free] = new_F
    assert abs(float(y @ moved)) < 1e-12
    assert objective(moved, y, K) < objective(alpha, y, K)
    np.testing.assert_allclose(F + dF, y - (y * moved) @ K, atol=1e-9)


def test_an_unblocked_step_lands_on_the_faces_minimiser() -> None:
    X, y, gamma = problem("wine")
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)
    K = kernel_of(W)
    C = 1e3  # the separable pair: every support vector free at the optimum
    best = smo_solve_distances(W, y, C, tol=1e-9)
    free = np.flatnonzero(best.alpha > 0.0)
    assert free.size >= 10 and best.alpha.max() < C
    # a point on the same face: the optimum moved along a direction that keeps yᵀα
    rng = np.random.default_rng(0)
    move = rng.normal(size=free.size)
    move -= y[free] * float(y[free] @ move) / free.size
    alpha = best.alpha.copy()
    alpha[free] += 0.2 * best.alpha[free].min() * move / np.abs(move).max()
    assert alpha[free].min() > 0.0 and abs(float(y @ alpha)) < 1e-12
    F = y - (y * alpha) @ K
    out = face_newton_step(W[free, : y.size], free, y[free], alpha[free], F[free], C)
    assert out is not None
    new_F, dF, blocked = out
    assert blocked == -1
    # the face's minimiser from the bordered KKT system, solved directly
    k = free.size
    Q_FF = (y[free, None] * y[None, free]) * K[np.ix_(free, free)]
    g_F = -y[free] * F[free]
    A = np.block([[Q_FF, y[free, None]], [y[None, free], np.zeros((1, 1))]])
    d = np.linalg.solve(A, np.r_[-g_F, 0.0])[:k]
    np.testing.assert_allclose(new_F, alpha[free] + d, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(new_F, best.alpha[free], rtol=1e-4, atol=1e-6)
    moved = alpha.copy()
    moved[free] = new_F
    F_new = y - (y * moved) @ K
    np.testing.assert_allclose(F + dF, F_new, atol=1e-9)
    assert np.ptp(F_new[free]) < 1e-6  # on the face F is one constant (the multiplier)


def test_a_blocked_step_stays_in_the_box_and_lowers_the_objective() -> None:
    X, y, gamma = problem("moons")
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)
    K = kernel_of(W)
    C = 0.05  # small: the Newton direction leaves the box
    free = np.arange(0, y.size, 5)
    alpha = interior_point(y, C, free, seed=1)
    F = y - (y * alpha) @ K
    out = face_newton_step(W[free, : y.size], free, y[free], alpha[free], F[free], C)
    assert out is not None
    new_F, dF, blocked = out
    assert blocked >= 0 and new_F[blocked] in (0.0, C)
    assert_a_descent_step(alpha, free, new_F, dF, F, y, K, C)


def test_the_blocking_point_and_its_bound_match_a_plain_ratio_test() -> None:
    """Blocked steps at several interior points: the blocking place and the end it is pinned to
    are those of the ratio test min over i of room_i / d_i (room C − α up, α down) on the face's
    minimiser (with the ridge εI) solved directly; among them a rising and a falling blocker."""
    X, y, gamma = problem("moons")
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)
    K = kernel_of(W)
    free = np.arange(0, y.size, 5)
    k = free.size
    Q_FF = (y[free, None] * y[None, free]) * K[np.ix_(free, free)] + RIDGE * k * np.eye(k)
    A = np.block([[Q_FF, y[free, None]], [y[None, free], np.zeros((1, 1))]])
    ends = set()
    # α_F in (0.015, 0.035): against C = 0.05 the room above is the smaller, against 0.5 below
    for seed, C in itertools.product(range(6), (0.05, 0.5)):
        alpha = interior_point(y, 0.05, free, seed=seed)
        F = y - (y * alpha) @ K
        out = face_newton_step(W[free, : y.size], free, y[free], alpha[free], F[free], C)
        assert out is not None
        new_F, _, blocked = out
        d = np.linalg.solve(A, np.r_[y[free] * F[free], 0.0])[:k]  # −g_F = y∘F
        a = alpha[free].tolist()
        pairs = zip(a, d.tolist(), strict=True)
        steps = [(C - a_i) / d_i if d_i > 0 else a_i / -d_i for a_i, d_i in pairs]
        worst = min(range(k), key=steps.__getitem__)
        if steps[worst] >= 1.0:
            assert blocked == -1
            continue
        assert blocked == worst
        assert new_F[blocked] == (C if d[worst] > 0 else 0.0)
        ends.add(new_F[blocked])
    assert 0.0 in ends and len(ends) >= 2  # pinned at 0 (falling) and at a C (rising)


@pytest.mark.parametrize("name", ["moons", "wine", "classification"])
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0, 100.0, 1000.0])
def test_smo_with_newton_steps_reaches_the_exact_optimum(
    name: str, C: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    X, y, gamma = problem(name)
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)
    K = kernel_of(W)
    steps = []
    real = smo_distances.face_newton_step
    monkeypatch.setattr(smo_distances, "face_newton_step", lambda *a: steps.append(1) or real(*a))
    ours = smo_solve_distances(W, y, C, newton=True)
    plain = smo_solve_distances(W, y, C)
    assert ours.converged and gap(ours.alpha, y, K, C) < 1e-3 + 1e-9
    alpha = ours.alpha
    assert abs(float(y @ alpha)) < 1e-9 and alpha.min() >= 0.0 and alpha.max() <= C
    assert objective(alpha, y, K) == pytest.approx(ours.objective, rel=1e-9)
    assert ours.objective == pytest.approx(clarabel_dual(K, y, C), rel=1e-4)
    assert ours.objective == pytest.approx(plain.objective, rel=1e-4)
    np.testing.assert_allclose(ours.grad, y - (y * alpha) @ K, atol=1e-9)
    # two tol-optimal solutions: at C = 1000 on moons (Q_FF's eigenvalues down to ~1e-5) their
    # free points' F, whose mean is the intercept, differ by a few tol
    assert ours.intercept == pytest.approx(plain.intercept, abs=2e-3 if C <= 100.0 else 1e-2)
    at_C = np.count_nonzero(alpha >= C)
    if name == "wine" and C >= 10.0:
        assert at_C == 0  # the separable pair: every support vector free
    if name == "moons" and C <= 0.1:
        assert at_C > np.count_nonzero((alpha > 0.0) & (alpha < C))  # mostly at the bound
    if C >= 10.0:
        assert steps and ours.n_iter < plain.n_iter


def test_a_stopped_run_with_newton_steps_resumes_to_the_optimum() -> None:
    X, y, gamma = problem("moons")
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)
    K = kernel_of(W)
    whole = smo_solve_distances(W, y, 10.0, newton=True)
    assert whole.n_iter > 30
    for stop in range(5, whole.n_iter, 7):  # some of them right after a Newton step
        first = smo_solve_distances(W, y, 10.0, newton=True, stop_if=(stop, lambda alpha: True))
        assert not first.converged and first.n_iter == stop
        np.testing.assert_allclose(first.grad, y - (y * first.alpha) @ K, atol=1e-9)
        rest = smo_solve_distances(W, y, 10.0, newton=True, start=first)
        assert rest.converged and gap(rest.alpha, y, K, 10.0) < 1e-3 + 1e-9
        assert rest.objective == pytest.approx(whole.objective, rel=1e-4)
    capped = smo_solve_distances(W, y, 10.0, newton=True, max_iter=7)
    assert not capped.converged and capped.n_iter == 7


def test_a_step_blocked_early_goes_on_to_the_minimiser_with_its_blocking_points_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step blocked before 1 / CONTINUE_FROM of the way goes on (``continue_blocked``); with no
    cap on its pieces it ends at the minimiser of the ridged quadratic on the face with the points
    at a bound held there, solved directly (the bordered KKT system with those points fixed),
    inside the box, on yᵀα = 0 and below the start's objective."""
    monkeypatch.setattr(face_newton, "MAX_CONTINUED", 10_000)
    X, y, gamma = problem("moons")
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)
    K = kernel_of(W)
    free = np.arange(0, y.size, 5)
    k = free.size
    M = (y[free, None] * y[None, free]) * K[np.ix_(free, free)] + RIDGE * k * np.eye(k)  # in d
    held_counts = []
    for seed, C in itertools.product(range(4), (0.04, 0.05)):
        alpha = interior_point(y, 0.05, free, seed=seed)
        alpha[free] *= C / 0.05
        F = y - (y * alpha) @ K
        a_F = alpha[free]
        d = np.linalg.solve(
            np.block([[M, y[free, None]], [y[None, free], np.zeros((1, 1))]]),
            np.r_[y[free] * F[free], 0.0],
        )[:k]
        room = np.where(d > 0, C - a_F, a_F) / np.abs(d)
        if room.min() >= 1.0 / face_newton.CONTINUE_FROM:
            continue
        out = face_newton_step(W[free, : y.size], free, y[free], a_F, F[free], C)
        assert out is not None
        new_F, dF, blocked = out
        held = np.flatnonzero((new_F == 0.0) | (new_F == C))
        assert blocked in held and held.size >= 2
        held_counts.append(held.size)
        # the face's minimiser with the held points fixed at their bounds, solved directly
        rows = np.r_[y[None, free], np.eye(k)[held]]
        A = np.block([[M, rows.T], [rows, np.zeros((rows.shape[0],) * 2)]])
        rhs = np.r_[y[free] * F[free], 0.0, new_F[held] - a_F[held]]
        best = a_F + np.linalg.solve(A, rhs)[:k]
        np.testing.assert_allclose(new_F, best, rtol=0.0, atol=1e-7 * C)
        assert_a_descent_step(alpha, free, new_F, dF, F, y, K, C)
    assert len(held_counts) >= 3 and max(held_counts) >= 3


def plain_continue_blocked(
    factor: np.ndarray,
    v: np.ndarray,
    sum_v: float,
    y_F: np.ndarray,
    a_F: np.ndarray,
    new: np.ndarray,
    target: np.ndarray,
    q: int,
    C: float,
) -> np.ndarray:
    """The continuation written plainly (P from M⁻¹ and an outer product, 2 × |F| ratios by
    broadcasting): the reference ``continue_blocked``'s doubled vectors must match to the bit."""
    k = new.size
    inv = dpotrs(factor, np.eye(k), 1)[0] * np.multiply.outer(y_F, y_F)  # Y M⁻¹ Y
    inv = dger(-1.0 / sum_v, y_F * v, y_F * v, 1, 1, inv, 1, 1, 1)  # P
    ends = np.array([[C], [0.0]]).repeat(k, 1)
    new, target, held, at = new.copy(), target.copy(), [q], [new[q]]
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(face_newton.MAX_CONTINUED):
            ends[:, q] = C + 1.0, -1.0
            col = inv[:, q].copy()
            if not col[q] > 0.0:
                break
            target = daxpy(col, target, k, (at[-1] - target[q]) / col[q])
            step = target - new
            ratio = (step / (ends - new)).ravel()
            worst = int(ratio.argmax())
            if ratio[worst] <= 1.0:
                new = target
                break
            if not ratio[worst] > 1.0:
                break
            new = daxpy(step, new, k, 1.0 / ratio[worst])
            inv = dger(-1.0 / col[q], col, col, 1, 1, inv, 1, 1, 1)
            q = worst % k
            held.append(q)
            at.append(C if worst < k else 0.0)
    new[held] = at
    spread = y_F * ((y_F @ new - y_F @ a_F) / max(k - len(held), 1))
    spread[held] = 0.0
    return new - spread


def test_continued_steps_match_the_plain_continuation_to_the_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``continue_blocked`` turns the factor's signs instead of M⁻¹'s and holds every vector twice
    over to spare broadcasts: the same operations on the same values, so the same α to the bit as
    the plain formulation, and its P is Y(M⁻¹ − v vᵀ / eᵀv)Y (M⁻¹ from numpy's inverse)."""
    X, y, gamma = problem("moons")
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)
    K = kernel_of(W)
    compared = []
    real = face_newton.continue_blocked

    def both(*args: object) -> np.ndarray:
        copies = [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args]
        ours = real(*args)
        compared.append(np.array_equal(ours, plain_continue_blocked(*copies)))
        return ours

    monkeypatch.setattr(face_newton, "continue_blocked", both)
    smo_solve_distances(W, y, 10.0, newton=True)  # moons at C = 10: every Newton step blocked
    free = np.arange(0, y.size, 5)
    for seed, C in itertools.product(range(4), (0.04, 0.05)):
        alpha = interior_point(y, 0.05, free, seed=seed)
        alpha[free] *= C / 0.05
        F = y - (y * alpha) @ K
        face_newton_step(W[free, : y.size], free, y[free], alpha[free], F[free], C)
    assert len(compared) >= 8 and all(compared)
    # the sign-turned factor's solve against numpy's inverse of Q_FF + εI = Y M Y
    k, y_F = free.size, y[free]
    M = np.tril(K[np.ix_(free, free)]) + RIDGE * k * np.eye(k)
    M += np.tril(M, -1).T  # the lower triangle the factor reads (K is symmetric to float32 only)
    factor, _ = dpotrf(M, 1)
    P = dpotrs(factor * y_F[:, None], np.eye(k), 1)[0]
    np.testing.assert_array_equal(P, dpotrs(factor, np.eye(k), 1)[0] * np.outer(y_F, y_F))
    Q_inv = np.linalg.inv(np.outer(y_F, y_F) * M)
    np.testing.assert_allclose(P, Q_inv, rtol=1e-6, atol=1e-6 * np.abs(Q_inv).max())


@pytest.mark.parametrize("name", ["moons", "wine"])
def test_the_fortran_gather_of_m_gives_the_c_ordered_take_s_step_to_the_bit(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """M gathered Fortran-ordered (from ``FORTRAN_GATHER_FROM`` points) and by ``take`` give the
    same α_F, ΔF and blocking place to the bit, on faces of 8 to 60 points, blocked or not; D is
    not symmetric to the bit here, so a mirrored M would be caught."""
    X, y, gamma = problem(name)
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)
    n = y.size
    D = np.ascontiguousarray(W[:, :n])
    D[np.triu_indices(n, 1)] += 1e-9  # entries that differ from their mirror's
    outs = {}
    for threshold in (2, 10**9):
        monkeypatch.setattr(face_newton, "FORTRAN_GATHER_FROM", threshold)
        runs = []
        for k, C, seed in itertools.product((8, 23, 60), (0.05, 10.0), range(2)):
            free = np.sort(np.random.default_rng(seed).choice(n, k, replace=False))
            alpha = interior_point(y, 0.05, free, seed=seed)
            F = y - (y * alpha) @ (1.0 - D)
            out = face_newton_step(D[free], free, y[free], alpha[free], F[free], C)
            assert out is not None
            runs.append((out[0].tobytes(), out[1].tobytes(), out[2]))
        outs[threshold] = runs
    assert outs[2] == outs[10**9]
    assert {r[2] for r in outs[2]} != {-1}  # blocked steps among them


def test_an_unclipped_step_stays_in_the_box_to_the_bit() -> None:
    """Where every d / room is at most ``UNCLIPPED_MAX`` (no clip follows), fl(α + d) lies in
    [0, C]: random α and steps pushed to that ratio, rooms down to a few ulps."""
    rng = np.random.default_rng(0)
    for C in (1.0, 10.0, 1e-3, 3.7e5):
        a = C * rng.uniform(0.0, 1.0, 200_000)
        a[:1000] = np.nextafter(C, 0.0) * np.ones(1000)  # no room up but an ulp
        a[1000:2000] = np.nextafter(0.0, 1.0) * rng.integers(1, 5, 1000)
        a = a[(a > 0.0) & (a < C)]
        rises = rng.random(a.size) < 0.5
        room = np.where(rises, C - a, -a)
        d = room * face_newton.UNCLIPPED_MAX * rng.uniform(1.0 - 1e-15, 1.0, a.size)
        ratio = d / room
        keep = ratio <= face_newton.UNCLIPPED_MAX
        assert keep.mean() > 0.9
        new = a[keep] + d[keep]
        assert new.min() >= 0.0 and new.max() <= C


@pytest.mark.parametrize("name", ["moons", "noisy"])
def test_the_continuation_by_columns_ends_where_all_of_p_ends(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faces of ``COLUMNS_FROM`` points or more make P's columns one at a time
    (``ProjectedColumns``): with the same cap on pieces, the same α_F as P made whole, to
    rounding, and, with no cap, the face's minimiser with the held points fixed (solved
    directly)."""
    X, y, gamma = problem(name)
    W = kernel_matrices.dense_kernel_matrix(X, "rbf", {"gamma": gamma}, doubled=True)
    K = kernel_of(W)
    free = np.arange(0, y.size, 2)  # 150 / 100 points: past COLUMNS_FROM
    k = free.size
    assert k >= face_newton.COLUMNS_FROM
    M = (y[free, None] * y[None, free]) * K[np.ix_(free, free)] + RIDGE * k * np.eye(k)
    compared = 0
    for seed, C in itertools.product(range(3), (0.04, 0.05)):
        alpha = interior_point(y, 0.05, free, seed=seed)
        alpha[free] *= C / 0.05
        F = y - (y * alpha) @ K
        args = (W[free, : y.size], free, y[free], alpha[free], F[free], C)
        monkeypatch.setattr(face_newton, "MAX_CONTINUED_COLUMNS", face_newton.MAX_CONTINUED)
        by_columns = face_newton_step(*args)
        monkeypatch.setattr(face_newton, "COLUMNS_FROM", 10**9)
        whole = face_newton_step(*args)
        monkeypatch.undo()
        assert by_columns is not None and whole is not None
        if whole[0].tolist() == (alpha[free] + 0.0).tolist():
            continue
        np.testing.assert_allclose(by_columns[0], whole[0], rtol=0.0, atol=1e-9 * C)
        np.testing.assert_allclose(by_columns[1], whole[1], rtol=0.0, atol=1e-9 * C * k)
        held = np.flatnonzero((whole[0] == 0.0) | (whole[0] == C))
        compared += held.size >= 2  # continued steps
        # no cap on pieces: P made whole gives the same α_F, and on moons (a face not nearly all
        # held) the directly solved minimiser
        monkeypatch.setattr(face_newton, "MAX_CONTINUED_COLUMNS", 10_000)
        out = face_newton_step(*args)
        monkeypatch.setattr(face_newton, "MAX_CONTINUED", 10_000)
        monkeypatch.setattr(face_newton, "COLUMNS_FROM", 10**9)
        whole = face_newton_step(*args)
        monkeypatch.undo()
        assert out is not None and whole is not None
        new_F, dF, _ = out
        np.testing.assert_allclose(new_F, whole[0], rtol=0.0, atol=1e-9 * C)
        assert_a_descent_step(alpha, free, new_F, dF, F, y, K, C)
        if name == "moons":
            held = np.flatnonzero((new_F == 0.0) | (new_F == C))
            rows = np.r_[y[None, free], np.eye(k)[held]]
            A = np.block([[M, rows.T], [rows, np.zeros((rows.shape[0],) * 2)]])
            rhs = np.r_[y[free] * F[free], 0.0, new_F[held] - alpha[free][held]]
            best = alpha[free] + np.linalg.solve(A, rhs)[:k]
            np.testing.assert_allclose(new_F, best, rtol=0.0, atol=1e-7 * C)
    assert compared >= 3
