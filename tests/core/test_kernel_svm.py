"""KernelSVM against scikit-learn's SVC (libsvm): dual objectives, predictions, exposed attributes."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core.exceptions import BsvmValueError, NotSeparableError
from bsvm_core.kernel_svm import KernelSVM
from bsvm_core.kernels import kernel_matrix, resolve_gamma


@cache
def dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "breast_cancer":
        X, y = load_breast_cancer(return_X_y=True)
    elif name == "digits":
        X, y = load_digits(return_X_y=True)
    else:
        X, y = make_classification(n_samples=2000, random_state=0)
    return StandardScaler().fit_transform(X), y


# (kernel, params): C, gamma, degree, coef0 shared by ours and SVC
KERNEL_CASES = {
    "linear": {"kernel": "linear", "C": 0.1},
    "poly_homogeneous": {"kernel": "poly", "C": 1.0, "degree": 2, "coef0": 0.0},
    "poly_inhomogeneous": {"kernel": "poly", "C": 1.0, "degree": 3, "coef0": 1.0},
    "rbf": {"kernel": "rbf", "C": 1.0},
    "sigmoid": {"kernel": "sigmoid", "C": 1.0, "coef0": 0.0, "gamma_factor": 0.1},
}


def case_params(case: str, X: np.ndarray) -> dict:
    params = dict(KERNEL_CASES[case])
    factor = params.pop("gamma_factor", 1.0)
    params["gamma"] = factor * resolve_gamma("scale", X)
    return params


def libsvm_objective(svc: SVC, X: np.ndarray, params: dict) -> float:
    """½ cᵀ K c − Σ|c| from SVC's dual coefficients c = y α (binary SVC only)."""
    c = svc.dual_coef_[0]
    S = X[svc.support_]
    K = kernel_matrix(
        S, S, params["kernel"], params["gamma"], params.get("degree", 3), params.get("coef0", 0.0)
    )
    return 0.5 * float(c @ K @ c) - float(np.abs(c).sum())


def svc_for(params: dict, tol: float = 1e-3) -> SVC:
    return SVC(tol=tol, max_iter=-1, **params)


@pytest.mark.parametrize("case", list(KERNEL_CASES))
@pytest.mark.parametrize("name", ["breast_cancer", "digits", "classification"])
def test_matches_libsvm(name: str, case: str) -> None:
    X, y = dataset(name)
    params = case_params(case, X)
    ours = KernelSVM(**params).fit(X, y)
    ref = svc_for(params).fit(X, y)
    agree = np.mean(ours.predict(X) == ref.predict(X))
    assert agree >= 0.995
    for p, (pos, neg) in enumerate(ours.binary_problems_):
        mask = np.isin(y, ours.classes_[[pos, neg]])
        sub = svc_for(params).fit(X[mask], y[mask]) if ours.classes_.size > 2 else ref
        expected = libsvm_objective(sub, X[mask], params)
        assert ours.objective_[p] == pytest.approx(expected, rel=1e-3)


def test_attributes_reproduce_decision_function() -> None:
    X, y = dataset("digits")
    est = KernelSVM(multiclass="ovo").fit(X, y)
    n_sv = est.support_.size
    assert est.dual_coef_.shape == (45, n_sv)
    assert est.support_vectors_.shape == (n_sv, X.shape[1])
    np.testing.assert_array_equal(est.support_vectors_, X[est.support_])
    assert est.n_support_.sum() == n_sv
    np.testing.assert_array_equal(est.n_support_, np.bincount(y[est.support_], minlength=10))
    K = kernel_matrix(X[:50], est.support_vectors_, "rbf", resolve_gamma("scale", X))
    D = K @ est.dual_coef_.T + est.intercept_
    for p, model in enumerate(est.binary_models_):
        np.testing.assert_allclose(D[:, p], est._decision_binary(model, X[:50]), atol=1e-10)
    # the support vectors are those with non-zero coefficients, and the sum y α is zero per problem
    assert np.all(np.any(est.dual_coef_ != 0, axis=0))
    np.testing.assert_allclose(est.dual_coef_.sum(axis=1), 0.0, atol=1e-8)


def test_binary_decision_from_attributes() -> None:
    X, y = dataset("breast_cancer")
    est = KernelSVM(kernel="poly", degree=2, coef0=1.0, C=0.5).fit(X, y)
    gamma = resolve_gamma("scale", X)
    K = kernel_matrix(X, est.support_vectors_, "poly", gamma, 2, 1.0)
    np.testing.assert_allclose(
        K @ est.dual_coef_[0] + est.intercept_[0], est.decision_function(X), atol=1e-10
    )
    assert est.objective_.shape == (1,)
    assert est.n_iter_.shape == (1,) and est.n_iter_[0] > 0
    assert np.all(np.abs(est.dual_coef_) <= 0.5 + 1e-12)


def test_callable_kernel_matches_named() -> None:
    X, y = dataset("breast_cancer")
    gamma = resolve_gamma("scale", X)

    def my_rbf(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
        return np.exp(-gamma * d2)

    named = KernelSVM(kernel="rbf", gamma=gamma).fit(X, y)
    custom = KernelSVM(kernel=my_rbf).fit(X, y)
    assert custom.objective_[0] == pytest.approx(named.objective_[0], rel=1e-6)
    np.testing.assert_array_equal(custom.predict(X), named.predict(X))
    ref = SVC(kernel=my_rbf).fit(X, y)
    assert np.mean(custom.predict(X) == ref.predict(X)) >= 0.995


def test_gamma_scale_and_auto() -> None:
    X, y = dataset("breast_cancer")
    X = X * 3.0
    for gamma, expected in [("scale", 1 / (30 * X.var())), ("auto", 1 / 30)]:
        est = KernelSVM(gamma=gamma).fit(X, y)
        assert est._gamma == pytest.approx(expected)
        ref = SVC(gamma=gamma).fit(X, y)
        assert np.mean(est.predict(X) == ref.predict(X)) >= 0.995


def separable_blobs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.r_[rng.normal(-3, 1, (40, 2)), rng.normal(3, 1, (40, 2))]
    y = np.r_[np.zeros(40), np.ones(40)]
    return X, y


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_hard_margin_is_the_limit_of_large_c(kernel: str) -> None:
    X, y = separable_blobs()
    hard = KernelSVM(C=np.inf, kernel=kernel, tol=1e-6).fit(X, y)
    soft = KernelSVM(C=1e6, kernel=kernel, tol=1e-6).fit(X, y)
    assert np.all(hard.predict(X) == y)
    assert hard.objective_[0] == pytest.approx(soft.objective_[0], rel=1e-6)
    np.testing.assert_allclose(hard.decision_function(X), soft.decision_function(X), atol=1e-5)
    # hard margin: every point on or outside the margin, support vectors on it
    f = hard.decision_function(X) * np.where(y == 1, 1.0, -1.0)
    assert f.min() == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize("kernel", ["linear", "poly"])
def test_hard_margin_raises_on_non_separable(kernel: str) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 2))
    y = (X[:, 0] + 0.8 * rng.normal(size=200) > 0).astype(int)
    with pytest.raises(NotSeparableError, match="not separable"):
        KernelSVM(C=np.inf, kernel=kernel, degree=2).fit(X, y)


def test_hard_margin_raises_on_conflicting_duplicates() -> None:
    X, y = separable_blobs()
    X = np.r_[X, X[:1]]
    y = np.r_[y, 1 - y[:1]]
    with pytest.raises(NotSeparableError, match="finite C"):
        KernelSVM(C=np.inf).fit(X, y)


@pytest.mark.parametrize(
    "params",
    [
        {"kernel": "cosine"},
        {"gamma": -1.0},
        {"gamma": "bogus"},
        {"degree": 1.5},
        {"tol": 0.0},
        {"max_iter": 0},
        {"cache_mb": 0},
        {"C": -1.0},
        {"multiclass": "all"},
    ],
)
def test_bad_parameters_raise(params: dict) -> None:
    X, y = separable_blobs()
    with pytest.raises(BsvmValueError):
        KernelSVM(**params).fit(X, y)


def test_max_iter_warns_and_ovr_matches_sklearn_accuracy() -> None:
    X, y = dataset("digits")
    with pytest.warns(UserWarning, match="max_iter"):
        KernelSVM(max_iter=5).fit(X[:200], y[:200])
    train, test = np.arange(0, X.shape[0], 2), np.arange(1, X.shape[0], 2)
    ours = KernelSVM(multiclass="ovr").fit(X[train], y[train])
    assert ours.dual_coef_.shape[0] == 10
    ref = OneVsRestClassifier(SVC()).fit(X[train], y[train])
    assert abs(ours.score(X[test], y[test]) - ref.score(X[test], y[test])) <= 0.005


def test_small_cache_gives_the_same_solution(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = dataset("classification")
    from bsvm_core import kernel_dual

    with monkeypatch.context() as m:  # rows through the cache in both fits, not a dense matrix
        m.setattr(kernel_dual, "DENSE_MAX_ROWS", 0)
        big = KernelSVM().fit(X, y)
    small = KernelSVM(cache_mb=0.05).fit(X, y)  # a handful of rows: constant eviction
    assert small.objective_[0] == pytest.approx(big.objective_[0], rel=1e-9)
    np.testing.assert_array_equal(small.support_, big.support_)


def test_kept_support_norms_change_no_decision_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rbf decision from the norms kept at fit equals, bit for bit, the one that computes
    them (a model pickled before they were kept), in one block and in several."""
    X, y = dataset("digits")
    est = KernelSVM(kernel="rbf", multiclass="ovr").fit(X, y)
    S = est.support_vectors_
    np.testing.assert_allclose(est._support_sq, (S * S).sum(axis=1), rtol=1e-12)
    kept = est.decision_function(X)
    old = KernelSVM(kernel="rbf", multiclass="ovr").fit(X, y)
    del old._support_sq
    np.testing.assert_array_equal(old.decision_function(X), kept)
    monkeypatch.setattr("bsvm_core.kernel_decision.PREDICT_BLOCK_MB", 8 * S.shape[0] * 7 / 2**20)
    blocked = est.decision_function(X)  # blocks of 7 rows (BLAS may sum them in another order)
    np.testing.assert_array_equal(old.decision_function(X), blocked)
    np.testing.assert_allclose(blocked, kept, rtol=0, atol=1e-12)


def test_binary_fit_keeps_its_problems_support_and_coefficients() -> None:
    """A binary fit's support_ and dual_coef_ are its one problem's, as arrays of their own, and
    _global_support maps that problem's support onto X's rows unchanged."""
    X, y = dataset("breast_cancer")
    est = KernelSVM(C=1.0).fit(X, y)
    model = est.binary_models_[0]
    np.testing.assert_array_equal(
        est.support_, np.flatnonzero(np.isin(np.arange(y.size), model.support))
    )
    assert est.support_.dtype == np.intp and est.dual_coef_.shape == (1, model.support.size)
    assert est.dual_coef_.tobytes() == model.coef.tobytes()
    assert not np.shares_memory(est.support_, model.support)
    assert not np.shares_memory(est.dual_coef_, model.coef)
    np.testing.assert_array_equal(est.support_vectors_, X[est.support_])
    y_idx = np.searchsorted(est.classes_, y)
    np.testing.assert_array_equal(est._global_support(y_idx)[0], model.support)
    K = kernel_matrix(X, est.support_vectors_, "rbf", resolve_gamma("scale", X))
    np.testing.assert_allclose(
        est.decision_function(X), K @ model.coef + model.intercept, rtol=0, atol=1e-10
    )


@pytest.mark.parametrize("dense", [True, False])
def test_support_union_scatters_each_problems_coefficients(
    dense: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """_support_union's support_ is np.unique of the supports and dual_coef_ holds each problem's
    coefficients at its rows' columns, 0 elsewhere, C-ordered: through the (problems, n) matrix
    and through the union's columns alike."""
    from bsvm_core import kernel_svm

    if not dense:
        monkeypatch.setattr(kernel_svm, "DENSE_SCATTER_MAX_ENTRIES", 0)
    rng = np.random.default_rng(5)
    n = 60
    supports = [np.sort(rng.choice(n, size=k, replace=False)) for k in (7, 0, 25, 1)]
    coefs = [rng.standard_normal(s.size) for s in supports]
    union, dual_coef = kernel_svm._support_union(n, supports, coefs)
    expected_union = np.unique(np.concatenate(supports))
    np.testing.assert_array_equal(union, expected_union)
    assert union.dtype == np.intp and dual_coef.flags.c_contiguous
    expected = np.zeros((len(supports), expected_union.size))
    for p, (rows, coef) in enumerate(zip(supports, coefs, strict=True)):
        for row, value in zip(rows, coef, strict=True):
            expected[p, list(expected_union).index(row)] = value
    assert dual_coef.tobytes() == expected.tobytes()


@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
def test_joint_fit_places_each_support_vector_on_its_row(multiclass: str) -> None:
    """A joint fit's supports (handed to _after_fit as rows of X) are the rows the problems' own
    classes give, and each problem's decision from the kept attributes is its model's own."""
    from sklearn.datasets import load_wine

    rng = np.random.default_rng(3)
    X, y = load_wine(return_X_y=True)
    order = rng.permutation(y.size)  # classes interleaved: a pair's rows are not a block
    X, y = StandardScaler().fit_transform(X)[order], y[order]
    est = KernelSVM(C=10.0, multiclass=multiclass).fit(X, y)
    assert not hasattr(est, "_joint_support")
    y_idx = np.searchsorted(est.classes_, y)
    expected = est._global_support(y_idx)
    union = np.unique(np.concatenate(expected))
    np.testing.assert_array_equal(est.support_, union)
    K = kernel_matrix(X, est.support_vectors_, "rbf", resolve_gamma("scale", X))
    for p, (rows, model) in enumerate(zip(expected, est.binary_models_, strict=True)):
        np.testing.assert_array_equal(est.support_vectors_[np.searchsorted(union, rows)], X[rows])
        np.testing.assert_array_equal(model.support_vectors, X[rows])
        own = kernel_matrix(X, model.support_vectors, "rbf", resolve_gamma("scale", X))
        np.testing.assert_allclose(
            K @ est.dual_coef_[p] + est.intercept_[p],
            own @ model.coef + model.intercept,
            atol=1e-10,
        )
