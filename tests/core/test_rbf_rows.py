"""``bsvm_core.rbf_rows``: an rbf model's decision values with the scaling folded in equal
the scaled model's own (scipy's distances as the independent reference) up to rounding."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.preprocessing import StandardScaler

from bsvm_core import KernelSVM, rbf_scoring
from bsvm_core.linear_rows import LinearRows
from bsvm_core.rbf_rows import RbfRows
from bsvm_core.row_plans import TIE_BOUND


def reference(model: KernelSVM, Z: np.ndarray) -> np.ndarray:
    """Σ_s w_s exp(−γ‖z − s‖²) + b by scipy's squared distances."""
    K = np.exp(-model._gamma * cdist(Z, model.support_vectors_, "sqeuclidean"))
    return K @ model.dual_coef_[0] + model.intercept_[0]


@pytest.fixture(scope="module")
def cancer() -> tuple[np.ndarray, StandardScaler, KernelSVM]:
    X, y = load_breast_cancer(return_X_y=True)
    scaler = StandardScaler().fit(X)
    return X, scaler, KernelSVM().fit(scaler.transform(X), y)


def test_scaled_rows_score_as_the_scaled_model(cancer) -> None:
    X, scaler, model = cancer
    plan = model.row_plan(scaler.mean_, scaler.scale_).rows
    rng = np.random.default_rng(0)
    rows = np.vstack([X, X[:50] * rng.uniform(0.5, 1.5, X[:50].shape), X[:5] * 1e3])
    expected = reference(model, scaler.transform(rows))
    scale = np.abs(model.dual_coef_).sum() + abs(model.intercept_[0])
    got = plan.scores(rows)[0][:, 0]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(
        model.decision_function(scaler.transform(rows)), expected, atol=1e-12 * scale
    )
    singles = np.array([plan.row(row)[0] for row in rows])
    np.testing.assert_allclose(singles, expected, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(plan.scores(rows[:1])[0][:, 0], singles[:1], rtol=1e-15)
    assert plan.tie[0] >= TIE_BOUND * scale and plan.tie[0] < 1e-4


def test_without_scaling_it_is_the_model() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    Z = StandardScaler().fit_transform(X)
    model = KernelSVM().fit(Z, y)
    plan = model.row_plan().rows
    assert plan is not None and plan.inv_scale is None
    np.testing.assert_allclose(plan.scores(Z)[0][:, 0], reference(model, Z), rtol=0, atol=1e-10)


@pytest.mark.parametrize("screen", [False, True])
def test_labels_are_the_models_and_unsure_marks_the_tie_band(cancer, monkeypatch, screen) -> None:
    X, scaler, model = cancer
    monkeypatch.setattr(rbf_scoring, "FLOAT32_SCREEN", screen)
    full = model.row_plan(scaler.mean_, scaler.scale_)
    plan = full.rows
    assert plan.tie32[0] > plan.tie[0]
    rng = np.random.default_rng(1)
    rows = np.vstack([X, X * rng.uniform(0.7, 1.3, X.shape)])
    expected = reference(model, scaler.transform(rows))
    index, certain = full.labels(rows)
    positive, unsure = index == 1, ~certain
    assert rows.shape[0] * plan.coef.size >= rbf_scoring.FLOAT32_MIN_ENTRIES
    np.testing.assert_array_equal(positive[~unsure], expected[~unsure] > 0)
    band = plan.tie32[0] if screen else plan.tie[0]
    np.testing.assert_array_equal(unsure, np.abs(expected) <= band)  # no row is that near 0
    # a row on the boundary: bisect between a positive and a negative row
    lo, hi = rows[np.argmin(expected)], rows[np.argmax(expected)]
    for _ in range(80):
        mid = (lo + hi) / 2
        if plan.row(mid)[0] > 0:
            hi = mid
        else:
            lo = mid
    near = np.vstack([lo, hi] * 40)
    _, certain = full.labels(near)
    assert not certain.any() and abs(plan.row(lo)[0]) <= plan.tie[0]
    assert full.row_label(lo) is None and full.row_label(hi) is None


def test_plans_of_other_kernels_and_multiclass() -> None:
    X, y = load_iris(return_X_y=True)
    assert isinstance(KernelSVM().fit(X, y).row_plan().rows, RbfRows)  # three classes
    two = y < 2
    assert isinstance(KernelSVM(kernel="linear").fit(X[two], y[two]).row_plan().rows, LinearRows)
    assert KernelSVM().row_plan() is None  # not fitted
    assert KernelSVM(kernel=lambda A, B: A @ B.T).fit(X[two], y[two]).row_plan() is None
