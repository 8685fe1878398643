"""rbf scoring: the one-product exponent, the float32 exponential's error bound, and labels that
equal the float64 decision values' labels even for rows on the boundary."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.datasets import load_breast_cancer, load_iris, make_classification
from sklearn.preprocessing import StandardScaler

from bsvm_core import KernelSVM, rbf_scoring
from bsvm_core.multiclass import binary_problems, certain_labels, label_index
from bsvm_core.rbf_scoring import (
    FLOAT32_FLOOR,
    KERNEL_ERROR,
    decision_error_bound,
    exp_float32,
    rbf_exponent,
    rbf_product,
    rbf_support_factor,
)


def test_screen_is_used_where_float64_exp_is_not_simd() -> None:
    assert rbf_scoring.FLOAT32_SCREEN is not rbf_scoring.float64_exp_is_simd()


def test_float32_exp_within_the_kernel_error() -> None:
    rng = np.random.default_rng(0)
    a = np.concatenate(
        [
            -rng.random(2_000_000) * -FLOAT32_FLOOR,
            -rng.random(200_000) * 1e-3,  # near 0, where e^a is largest
            np.linspace(FLOAT32_FLOOR, 0.0, 100_001),
            [0.0, -1e-300, FLOAT32_FLOOR, -88.0, -103.9, -104.0],
        ]
    )
    err = np.abs(exp_float32(a.copy()) - np.exp(a))
    assert err.max() <= KERNEL_ERROR
    # the bound is not loose by orders of magnitude: the rounding of a alone reaches a fifth of it
    assert err.max() > KERNEL_ERROR / 50


def test_exponents_below_the_floor_count_as_zero_within_the_bound() -> None:
    a = np.array([-111.0, -1e3, -1e39, -1e300, -np.inf])
    with np.errstate(over="raise", invalid="raise"):  # no overflow in the cast to float32
        assert np.all(exp_float32(a) <= KERNEL_ERROR)
    # and what rounding pushed above 0 counts as 0
    np.testing.assert_array_equal(exp_float32(np.array([1e-15, 0.5])), [1.0, 1.0])


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_exponent_is_minus_gamma_squared_distance(offset: float) -> None:
    rng = np.random.default_rng(1)
    S = rng.standard_normal((40, 7)) + offset
    X = rng.standard_normal((25, 7)) + offset
    X[3] = S[5]  # a row on a support vector: distance 0, exponent clipped to exactly ≤ 0
    gamma = 0.3
    center, right = rbf_support_factor(S, gamma)
    A = rbf_exponent(X, center, right, gamma)
    assert np.all(rbf_product(X, center, right, gamma) <= 1e-12)
    exact = -gamma * cdist(X, S, "sqeuclidean")  # differences first: no cancellation
    # centring on the support vectors keeps the error at the data's spread, not its offset
    assert np.max(np.abs(A - exact)) < 1e-12 * gamma * 7 * 16
    assert np.all(A <= 0.0)
    assert A[3, 5] > -1e-12


def test_decision_values_with_float32_exp_within_the_bound() -> None:
    X, y = make_classification(600, 12, n_informative=6, n_classes=3, random_state=2)
    X = StandardScaler().fit_transform(X)
    for scheme in ("ovo", "ovr"):
        model = KernelSVM(C=10.0, multiclass=scheme).fit(X, y)
        Xt = np.random.default_rng(3).standard_normal((500, 12)) * 1.5
        exact = model._decision_matrix(Xt)
        screened = model._decision_matrix(Xt, float32_exp=True)
        bound = decision_error_bound(model.dual_coef_.T)
        gap = np.abs(screened - exact)
        assert np.all(gap <= bound)
        assert gap.max() > 0.0  # float32 really was used


FLOAT64_ALLOWANCE = 1e-12
"""How far two float64 evaluations of a decision value may differ, per unit of Σ|w|: far above
their rounding (~1e-15), far below the float32 screen's bound (~1e-6)."""


def _near_a_tie(D: np.ndarray, within: np.ndarray, multiclass: str) -> np.ndarray:
    """Rows whose label a change of ``within`` (per column) in D could flip: a sign of a binary
    or one-vs-one decision value, or the order of the two largest one-vs-rest values."""
    if multiclass == "ovr":
        order = np.argsort(-D, axis=1)[:, :2]
        top = np.take_along_axis(D, order, axis=1)
        return top[:, 0] - top[:, 1] <= within[order].sum(axis=1)
    return np.any(np.abs(D) <= within, axis=1)


def _exact_labels(model: KernelSVM, X: np.ndarray) -> np.ndarray:
    return label_index(model._decision_matrix(X), model.binary_problems_, model.classes_.size)


def _boundary_rows(model: KernelSVM, X: np.ndarray, n: int, steps: int = 80) -> np.ndarray:
    """Rows where the float64 label changes (within 2⁻ˢᵗᵉᵖˢ of the segment), by bisection between
    points of different labels."""
    labels = _exact_labels(model, X)
    rows = []
    for k in range(n):
        a = X[k % len(X)]
        others = X[labels != labels[k % len(X)]]
        b = others[(7 * k) % len(others)]
        label_a = _exact_labels(model, a[None])[0]
        for _ in range(steps):
            mid = 0.5 * (a + b)
            if _exact_labels(model, mid[None])[0] == label_a:
                a = mid
            else:
                b = mid
        rows.append(a if k % 2 else b)
    return np.array(rows)


@pytest.fixture(params=[True, False], ids=["screen", "float64"])
def screen(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both ways ``predict`` may take, whatever this CPU's default (``FLOAT32_SCREEN``)."""
    monkeypatch.setattr(rbf_scoring, "FLOAT32_SCREEN", request.param)
    return request.param


def _spy_float32(model: KernelSVM, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records the ``float32_exp`` of every ``_decision_matrix`` call of ``model``."""
    calls: list[bool] = []
    real = model._decision_matrix

    def spy(X: np.ndarray, float32_exp: bool = False) -> np.ndarray:
        calls.append(float32_exp)
        return real(X, float32_exp)

    monkeypatch.setattr(model, "_decision_matrix", spy)
    return calls


@pytest.mark.parametrize("multiclass", ["binary", "ovo", "ovr"])
def test_predict_equals_float64_labels_on_the_boundary(
    multiclass: str, screen: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if multiclass == "binary":
        X, y = load_breast_cancer(return_X_y=True)
        model = KernelSVM(C=1.0)
    else:
        X, y = load_iris(return_X_y=True)
        model = KernelSVM(C=10.0, multiclass=multiclass)
    X = StandardScaler().fit_transform(X)
    model.fit(X, y)
    edge = _boundary_rows(model, X, 40)  # within 2⁻⁸⁰: ties, as far as float64 can tell
    near = _boundary_rows(model, X, 40, steps=30)  # past float64's rounding, not float32's
    rest = np.random.default_rng(4).standard_normal((3000, X.shape[1]))
    Xt = np.vstack([X, edge, near, rest])
    assert Xt.shape[0] * model.support_vectors_.shape[0] >= 4096  # the screen is used
    D = model._decision_matrix(Xt)
    expected = model.classes_[label_index(D, model.binary_problems_, model.classes_.size)]
    # float64 decision values themselves move with BLAS's kernel and the batch's shape (AVX-512
    # OpenBLAS: 7e-15 between the same rows in a batch of 190 and of 40), so a row within that
    # rounding of a tie has no one float64 label: every other row must get exactly D's label
    rounding = FLOAT64_ALLOWANCE * (1.0 + np.abs(model.dual_coef_).sum(axis=1))
    sure = ~_near_a_tie(D, rounding, multiclass)
    calls = _spy_float32(model, monkeypatch)
    np.testing.assert_array_equal(model.predict(Xt)[sure], expected[sure])
    assert calls[0] is screen  # float32 first exactly when screening
    start = len(X) + len(edge)
    assert np.all(sure[: len(X)]) and np.all(sure[start + len(near) :])
    assert np.count_nonzero(sure[start : start + len(near)]) >= 30  # most near rows are checked
    # and the boundary rows were ones the screen could not settle: float64 gave their labels
    screened = model._decision_matrix(np.vstack([edge, near]), float32_exp=True)
    _, certain = certain_labels(
        screened, model._rbf_scoring()[2], model.binary_problems_, model.classes_.size
    )
    assert not certain.any()


def test_predict_is_decision_sign_for_binary(screen: bool) -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    model = KernelSVM().fit(X, y)
    Xt = np.random.default_rng(5).standard_normal((2000, 30)) * 0.7
    np.testing.assert_array_equal(
        model.predict(Xt), model.classes_[(model.decision_function(Xt) > 0).astype(int)]
    )


def test_certain_labels_binary() -> None:
    D = np.array([[0.5], [-0.5], [1e-7], [-1e-7], [0.0]])
    labels, certain = certain_labels(D, np.array([1e-6]), [(1, 0)], 2)
    np.testing.assert_array_equal(labels, [1, 0, 1, 0, 0])
    np.testing.assert_array_equal(certain, [True, True, False, False, False])


def test_certain_labels_one_vs_rest() -> None:
    problems = binary_problems(3, "ovr")
    D = np.array([[1.0, 0.2, -0.5], [0.3, 0.3 + 1e-7, -1.0], [-0.2, -0.1, -0.1 - 3e-6]])
    labels, certain = certain_labels(D, np.full(3, 1e-6), problems, 3)
    np.testing.assert_array_equal(labels, [0, 1, 1])
    np.testing.assert_array_equal(certain, [True, False, True])


def test_certain_labels_one_vs_one() -> None:
    problems = binary_problems(3, "ovo")  # (1, 0), (2, 0), (2, 1)
    D = np.array(
        [
            [1.0, 1.0, 1.0],  # class 2 wins twice
            [1.0, 1.0, 1e-8],  # a sign not sure
            [1.0, -1.0, 1.0],  # one vote each: the confidences decide, left to float64
        ]
    )
    labels, certain = certain_labels(D, np.full(3, 1e-6), problems, 3)
    np.testing.assert_array_equal(certain, [True, False, False])
    assert labels[0] == 2


def test_model_saved_without_the_factor_still_predicts() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    model = KernelSVM().fit(X, y)
    expected = model.decision_function(X)
    old = pickle.loads(pickle.dumps(model))
    delattr(old, "_rbf_kept")  # saved before the factor was kept
    np.testing.assert_allclose(old.decision_function(X), expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(old.predict(X), model.predict(X))


def test_factor_made_on_first_use_is_the_one_of_the_support_vectors() -> None:
    """fit leaves the factor unmade; the first decision makes it, bit for bit
    ``rbf_support_factor`` of the support vectors and ``decision_error_bound`` of the dual
    coefficients, keeps it for the next calls, and changes no attribute (only the list's
    content); a model pickled before any decision makes the same one and the same labels."""
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    model = KernelSVM(C=10.0).fit(X, y)
    assert model._rbf_kept == []
    saved = pickle.loads(pickle.dumps(model))
    before = dict(model.__dict__)
    labels = model.predict(X)
    assert model.__dict__ == before  # the same objects: only the kept list filled
    center, right = rbf_support_factor(model.support_vectors_, model._gamma)
    error = decision_error_bound(model.dual_coef_.T)
    (kept,) = model._rbf_kept
    for made, reference in zip(kept, (center, right, error), strict=True):
        assert made.tobytes() == reference.tobytes()
    assert model._rbf_scoring() is kept  # made once
    np.testing.assert_array_equal(saved.predict(X), labels)
    assert saved.decision_function(X).tobytes() == model.decision_function(X).tobytes()
    model.fit(X[:100], y[:100])  # a refit forgets the old factor
    assert model._rbf_kept == []
    assert model._rbf_scoring()[1].shape[1] == model.support_vectors_.shape[0]


def test_threads_meeting_an_unmade_factor_predict_alike() -> None:
    """Threads that predict at once on a model whose factor is not made yet all get the labels
    and decision values of a model whose factor was made first, and keep one factor."""
    from concurrent.futures import ThreadPoolExecutor

    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    reference = KernelSVM(C=10.0).fit(X, y)
    labels, decisions = reference.predict(X), reference.decision_function(X)
    for _ in range(5):
        model = KernelSVM(C=10.0).fit(X, y)

        def score(_: int, model: KernelSVM = model) -> tuple[np.ndarray, np.ndarray]:
            return model.predict(X), model.decision_function(X)

        with ThreadPoolExecutor(4) as pool:
            out = list(pool.map(score, range(8)))
        for got_labels, got_decisions in out:
            np.testing.assert_array_equal(got_labels, labels)
            assert got_decisions.tobytes() == decisions.tobytes()
        first = model._rbf_scoring()
        for made in model._rbf_kept:
            for a, b in zip(made, first, strict=True):
                assert a.tobytes() == b.tobytes()
