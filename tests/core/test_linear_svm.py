"""LinearSVM against independent references: libsvm (SVC linear) and the primal QP solved by Clarabel."""

from __future__ import annotations

import clarabel
import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import load_breast_cancer, load_iris, make_blobs
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core.exceptions import BsvmValueError, NotSeparableError
from bsvm_core.linear_svm import LinearSVM
from bsvm_core.solvers.linear_objective import optimal_intercept, primal_objective


def clarabel_svm(X: np.ndarray, y: np.ndarray, C: float, fit_intercept: bool = True) -> float:
    """Optimal value of the primal QP (hinge via slacks; C = inf drops them), by Clarabel."""
    n, d = X.shape
    nb = int(fit_intercept)
    ns = 0 if np.isinf(C) else n
    nv = d + nb + ns
    P = sparse.diags(np.r_[np.ones(d), np.zeros(nb + ns)]).tocsc()
    q = np.r_[np.zeros(d + nb), np.full(ns, C if ns else 0.0)]
    # y_i(w'x_i + b) + ξ_i >= 1   ->   -y_i x_i'w - y_i b - ξ_i + s = -1,  s >= 0;   -ξ + s = 0
    margin = [sparse.csc_matrix(-(y[:, None] * X))]
    margin += [sparse.csc_matrix(-y[:, None])] if nb else []
    margin += [-sparse.identity(n, format="csc")] if ns else []
    rows = [sparse.hstack(margin)]
    rhs = [-np.ones(n)]
    if ns:
        rows.append(sparse.hstack([sparse.csc_matrix((n, d + nb)), -sparse.identity(n)]))
        rhs.append(np.zeros(n))
    A = sparse.vstack(rows).tocsc()
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = 1e-12
    settings.tol_gap_rel = 1e-12
    settings.tol_feas = 1e-12
    settings.max_iter = 500
    solver = clarabel.DefaultSolver(
        sparse.triu(P).tocsc(),
        q,
        A,
        np.concatenate(rhs),
        [clarabel.NonnegativeConeT(A.shape[0])],
        settings,
    )
    sol = solver.solve()
    assert str(sol.status) in ("Solved", "AlmostSolved"), sol.status
    assert nv == len(sol.x)
    return float(sol.obj_val)


@pytest.fixture(scope="module")
def cancer() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


def _objective(est: LinearSVM, X: np.ndarray, y: np.ndarray) -> float:
    return primal_objective(X, y, est.coef_[0], float(est.intercept_[0]), float(est.C))


@pytest.mark.parametrize("C", [0.1, 1.0])
def test_auto_coefficients_match_libsvm(cancer, C: float) -> None:
    X, y = cancer
    ours = LinearSVM(C=C).fit(X, y)
    ref = SVC(kernel="linear", C=C, tol=1e-10).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-4, rtol=0)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-4, rtol=0)
    assert ours.converged_.all()


@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_auto_objective_matches_exact_qp(cancer, C: float) -> None:
    X, y = cancer
    ours = LinearSVM(C=C).fit(X, y)
    ref = clarabel_svm(X, y, C)
    assert _objective(ours, X, y) == pytest.approx(ref, rel=1e-6)
    assert ours.objective_[0] == pytest.approx(_objective(ours, X, y), rel=1e-12)


@pytest.mark.filterwarnings("ignore::bsvm_core.exceptions.ConvergenceWarning")
def test_subgradient_within_one_percent(cancer) -> None:
    X, y = cancer
    ref = clarabel_svm(X, y, 1.0)
    ours = LinearSVM(C=1.0, solver="subgradient", max_iter=2000, tol=1e-8).fit(X, y)
    assert ref <= _objective(ours, X, y) <= 1.01 * ref


@pytest.mark.filterwarnings("ignore::bsvm_core.exceptions.ConvergenceWarning")
def test_subgradient_with_learning_rate_converges(cancer) -> None:
    X, y = cancer
    ref = clarabel_svm(X, y, 0.1)
    ours = LinearSVM(C=0.1, solver="subgradient", learning_rate=1.0, max_iter=1500, tol=1e-8)
    ours.fit(X, y)
    assert ref <= _objective(ours, X, y) <= 1.01 * ref


def test_subgradient_stops_on_tolerance(cancer) -> None:
    X, y = cancer
    loose = LinearSVM(C=0.1, solver="subgradient", tol=1e-2, max_iter=5000).fit(X, y)
    assert loose.converged_.all()
    assert loose.n_iter_[0] < 5000


@pytest.mark.filterwarnings("ignore::bsvm_core.exceptions.ConvergenceWarning")
def test_auto_fit_intercept_false(cancer) -> None:
    X, y = cancer
    ours = LinearSVM(C=1.0, fit_intercept=False).fit(X, y)
    assert ours.intercept_[0] == 0.0
    assert _objective(ours, X, y) == pytest.approx(clarabel_svm(X, y, 1.0, False), rel=1e-6)
    sub = LinearSVM(C=1.0, fit_intercept=False, solver="subgradient", max_iter=2000, tol=1e-8)
    sub.fit(X, y)
    assert sub.intercept_[0] == 0.0
    assert _objective(sub, X, y) <= 1.01 * _objective(ours, X, y)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_more_features_than_samples(fit_intercept: bool) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(25, 120))
    y = np.where(rng.random(25) < 0.5, 1.0, -1.0)
    ours = LinearSVM(C=0.05, fit_intercept=fit_intercept).fit(X, y)
    ref = clarabel_svm(X, y, 0.05, fit_intercept)
    assert _objective(ours, X, y) == pytest.approx(ref, rel=1e-6)


def test_separable_data_with_finite_c() -> None:
    X, y01 = make_blobs(n_samples=200, centers=[[-3, -3], [3, 3]], random_state=0)
    y = np.where(y01 == 1, 1.0, -1.0)
    for C in (1.0, 50.0):
        ours = LinearSVM(C=C).fit(X, y)
        assert _objective(ours, X, y) == pytest.approx(clarabel_svm(X, y, C), rel=1e-6)


def test_hard_margin_is_the_large_c_limit() -> None:
    X, y01 = make_blobs(n_samples=120, centers=[[-2, 0, 1], [2, 1, 0]], random_state=3)
    y = np.where(y01 == 1, 1.0, -1.0)
    hard = LinearSVM(C=float("inf")).fit(X, y)
    big = LinearSVM(C=1e6).fit(X, y)
    assert hard.converged_.all()
    np.testing.assert_allclose(hard.coef_, big.coef_, atol=1e-6)
    np.testing.assert_allclose(hard.intercept_, big.intercept_, atol=1e-6)
    w = hard.coef_[0]
    assert hard.objective_[0] == pytest.approx(0.5 * w @ w, rel=1e-12)
    assert hard.objective_[0] == pytest.approx(clarabel_svm(X, y, np.inf), rel=1e-6)
    assert np.min(y * hard.decision_function(X)) >= 1.0 - 1e-8


def test_hard_margin_raises_when_not_separable(cancer) -> None:
    X, y = cancer  # breast cancer is not linearly separable
    with pytest.raises(NotSeparableError, match="separat"):
        LinearSVM(C=float("inf")).fit(X[:, :2], y)
    Xor = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(NotSeparableError):
        LinearSVM(C=float("inf")).fit(Xor, [0, 0, 1, 1])


def test_hard_margin_needs_auto_solver() -> None:
    with pytest.raises(BsvmValueError, match="auto"):
        LinearSVM(C=float("inf"), solver="subgradient").fit([[0.0], [1.0]], [0, 1])


@pytest.mark.parametrize(
    "bad",
    [{"solver": "newton"}, {"max_iter": 0}, {"tol": -1.0}, {"learning_rate": 0.0}, {"C": -1.0}],
)
def test_bad_parameters_raise(bad: dict) -> None:
    with pytest.raises(ValueError):
        LinearSVM(**bad).fit([[0.0], [1.0]], [0, 1])


def test_optimal_intercept_is_the_minimiser() -> None:
    rng = np.random.default_rng(0)
    s, y = rng.normal(size=60), np.where(rng.random(60) < 0.4, 1.0, -1.0)
    b = optimal_intercept(s, y)
    hinge = lambda c: np.maximum(0.0, 1.0 - y * (s + c)).sum()  # noqa: E731
    grid = np.linspace(b - 3.0, b + 3.0, 6001)
    assert hinge(b) <= min(hinge(c) for c in grid) + 1e-12


@pytest.mark.parametrize("scheme", ["ovr", "ovo"])
def test_multiclass_on_iris(scheme: str) -> None:
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    est = LinearSVM(C=1.0, multiclass=scheme).fit(X, y)
    n_problems = 3
    assert est.coef_.shape == (n_problems, 4)
    assert est.intercept_.shape == (n_problems,)
    if scheme == "ovr":
        scores = est.decision_function(X)
        for k in range(3):  # problem k is the binary fit of class k against the rest
            binary = LinearSVM(C=1.0).fit(X, np.where(y == k, 1, 0))
            np.testing.assert_allclose(est.coef_[k], binary.coef_[0])
            np.testing.assert_allclose(scores[:, k], binary.decision_function(X))
        assert est.score(X, y) >= 0.9
    else:
        ref = SVC(kernel="linear", C=1.0, tol=1e-8).fit(X, y)
        assert np.mean(est.predict(X) == ref.predict(X)) >= 0.99
        # the same pairwise hyperplanes as libsvm: its pair (i, j) votes for i when > 0, ours for j
        sk = SVC(kernel="linear", C=1.0, tol=1e-10, decision_function_shape="ovo").fit(X, y)
        np.testing.assert_allclose(est._decision_matrix(X), -sk.decision_function(X), atol=1e-4)


def test_probability_and_labels() -> None:
    X, y01 = make_blobs(n_samples=120, centers=2, cluster_std=3.0, random_state=0)
    y = np.array(["neg", "pos"])[y01]
    est = LinearSVM(probability=True, random_state=0).fit(X, y)
    proba = est.predict_proba(X)
    assert proba.shape == (120, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert list(est.classes_) == ["neg", "pos"]
    assert np.mean(est.predict(X) == est.classes_[proba.argmax(axis=1)]) >= 0.95
