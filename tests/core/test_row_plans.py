"""``bsvm_core.row_plans``: every foldable model's plan, behind a random scaling, gives the
estimator's decision values up to rounding and its labels wherever it calls them certain; rows
built on a label boundary are never certain. The reference is the estimator itself on rows scaled
by scikit-learn's ``StandardScaler``."""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler

from bsvm_core import LDA, QDA, BayesianSVM, KernelSVM, LinearSVM, rbf_scoring
from bsvm_core.kernels import kernel_matrix
from bsvm_core.row_plans import RowPlan

MODELS: dict[str, Callable[[], Any]] = {
    "linear-ovr": lambda: LinearSVM(),
    "linear-ovo": lambda: LinearSVM(multiclass="ovo"),
    "linear-subgradient": lambda: LinearSVM(solver="subgradient", max_iter=300),
    "rbf-ovo": lambda: KernelSVM(),
    "rbf-ovr": lambda: KernelSVM(multiclass="ovr", gamma=0.3),
    "klinear-ovo": lambda: KernelSVM(kernel="linear"),
    "klinear-ovr": lambda: KernelSVM(kernel="linear", multiclass="ovr"),
    "poly-homogeneous": lambda: KernelSVM(kernel="poly", degree=2),
    "poly-inhomogeneous-ovr": lambda: KernelSVM(
        kernel="poly", degree=3, coef0=1.0, multiclass="ovr"
    ),
    "sigmoid": lambda: KernelSVM(kernel="sigmoid", gamma=0.05, coef0=-0.5),
    "sigmoid-ovr": lambda: KernelSVM(kernel="sigmoid", gamma=0.05, multiclass="ovr"),
    "em": lambda: BayesianSVM(method="em", alpha=1.0),
    "ecme": lambda: BayesianSVM(method="ecme", alpha=1.0),
    "mcmc": lambda: BayesianSVM(method="mcmc", n_draws=40, burn_in=20, n_chains=2, random_state=0),
    "spike_slab": lambda: BayesianSVM(
        method="spike_slab", n_draws=40, burn_in=20, n_chains=2, random_state=0
    ),
    "lda": lambda: LDA(),
}


def data(n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray, StandardScaler]:
    """Overlapping Gaussian classes on features of random location and scale, and a scaler
    fitted on them (random ``with_mean`` / ``with_std``)."""
    rng = np.random.default_rng(seed)
    d = 5
    centres = rng.normal(0, 1.5, (n_classes, d))
    y = np.arange(120) % n_classes
    Z = centres[y] + rng.normal(0, 1, (120, d))
    X = Z * rng.uniform(0.2, 5, d) + rng.normal(0, 5, d)
    scaler = StandardScaler(with_mean=bool(seed % 3), with_std=bool(seed % 4)).fit(X)
    return X, y, scaler


def term_scale(model: Any, Z: np.ndarray) -> np.ndarray:
    """Per scaled row z, the largest over problems of the magnitudes the decision sums:
    |K(z, S)| |W| + |b| (kernel models) or |z| |W| + |b| (linear ones), (n, 1)."""
    if isinstance(model, KernelSVM):
        K = kernel_matrix(Z, model.support_vectors_, model.kernel, **model._kernel_args())
        T = np.abs(K) @ np.abs(model.dual_coef_.T)
    else:
        T = np.abs(Z) @ np.abs(np.atleast_2d(model.coef_)).T
    return (T + np.abs(model.intercept_)).max(axis=1, keepdims=True)


def decision_matrix(model: Any, Z: np.ndarray) -> np.ndarray:
    """The estimator's own D (n, p) of scaled rows Z, before its decision_function's output."""
    if isinstance(model, LDA):
        jll = model._joint_log_likelihood(Z)
        return jll[:, 1:] if model.classes_.size == 2 else jll
    if isinstance(model, BayesianSVM):
        return Z @ np.atleast_2d(model.coef_).T + model.intercept_
    return model._decision_matrix(Z)


def near_boundaries(plan: RowPlan, X: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Pairs of rows a rounding apart on either side of a label boundary of the plan, found by
    bisecting segments between rows of different labels."""
    out = []
    idx = [np.flatnonzero(labels == k)[:3] for k in np.unique(labels)]
    for i in idx[0]:
        for group in idx[1:]:
            for j in group:
                lo, hi = X[i].copy(), X[j].copy()
                k_lo = plan.rows.row(lo)  # bisect on the full label rule, via certain_labels
                for _ in range(70):
                    mid = (lo + hi) / 2
                    if plan.labels(mid[None, :])[0][0] == plan.labels(lo[None, :])[0][0]:
                        lo = mid
                    else:
                        hi = mid
                assert k_lo.shape == plan.rows.row(hi).shape
                out += [lo, hi]
    return np.array(out)


def check_block_labels(plan: Any, model: Any, scaler: Any, rows: np.ndarray) -> np.ndarray:
    """Assert a block's D is within its bound of the estimator's, its certain labels are the
    estimator's (and one row's where the block is certain), nearly all certain; the truth."""
    D, E = plan.rows.scores(rows)
    assert np.all(np.abs(D - decision_matrix(model, scaler.transform(rows))) <= E)  # its bound
    index, certain = plan.labels(rows)
    for i in range(0, rows.shape[0], 11):  # one row's label: the block's, when that is certain
        if certain[i]:  # (a block may take rbf's exp in float32: a wider band than one row's)
            assert plan.row_label(rows[i]) == index[i]
    truth = np.searchsorted(model.classes_, model.predict(scaler.transform(rows)))
    np.testing.assert_array_equal(index[certain], truth[certain])
    assert certain.mean() > 0.9
    return truth


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("name", list(MODELS))
def test_plan_decisions_and_labels_are_the_estimators(name: str, n_classes: int) -> None:
    seed = zlib.crc32(name.encode()) % 7 + n_classes
    X, y, scaler = data(n_classes, seed)
    Z = scaler.transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MODELS[name]().fit(Z, y)
    mean = scaler.mean_ if scaler.with_mean else None
    scale = scaler.scale_ if scaler.with_std else None
    plan = model.row_plan(mean, scale)
    assert plan is not None
    rng = np.random.default_rng(seed)
    rows = np.vstack([X, X[:40] * rng.uniform(0.5, 1.5, X[:40].shape)])
    expected = model.decision_function(scaler.transform(rows))
    scale = term_scale(model, scaler.transform(rows))
    tol = 1e-12 * (scale if expected.ndim == 2 else scale[:, 0])
    values, sure = plan.decisions(rows)
    assert values.shape == expected.shape
    keep = slice(None) if sure is None else sure
    assert np.all(np.abs(values - expected)[keep] <= tol[keep])
    assert sure is None or sure.mean() > 0.9
    for i in range(0, rows.shape[0], 17):
        one = plan.row_decision(rows[i])
        if one is not None:
            assert np.all(np.abs(one - expected[i : i + 1]) <= tol[i : i + 1])
    truth = check_block_labels(plan, model, scaler, rows)
    for i in range(0, rows.shape[0], 13):
        k = plan.row_label(rows[i])
        assert k is None or k == truth[i]
    near = near_boundaries(plan, rows, truth)
    _, certain = plan.labels(near)
    assert not certain.any()  # a rounding apart across a boundary: never certain
    assert all(plan.row_label(row) is None for row in near)
    # near a boundary too, decision values are the estimator's wherever the plan is sure (a
    # one-vs-one pairwise sign near 0 is not: its vote could go either way)
    values, sure = plan.decisions(near)
    expected = model.decision_function(scaler.transform(near))
    tol = 1e-12 * term_scale(model, scaler.transform(near))
    keep = np.ones(near.shape[0], dtype=bool) if sure is None else sure
    assert np.all(
        np.abs(values - expected)[keep] <= (tol if expected.ndim == 2 else tol[:, 0])[keep]
    )
    if plan.output == "votes":
        pairwise = plan.rows.scores(near)[0]
        assert not sure[np.abs(pairwise).min(axis=1) < 1e-9].any()


@pytest.mark.parametrize("screen", [False, True])
def test_rbf_multiclass_labels_with_the_float32_screen(monkeypatch, screen: bool) -> None:
    monkeypatch.setattr(rbf_scoring, "FLOAT32_SCREEN", screen)
    X, y, scaler = data(4, 5)
    model = KernelSVM(multiclass="ovr").fit(scaler.transform(X), y)
    plan = model.row_plan(scaler.mean_ if scaler.with_mean else None, scaler.scale_)
    rows = np.vstack([X] * 40)  # enough kernel entries for the screen
    assert rows.shape[0] * plan.rows.width >= rbf_scoring.FLOAT32_MIN_ENTRIES
    check_block_labels(plan, model, scaler, rows)


def test_no_plan_for_qda_or_unfitted_models() -> None:
    assert not hasattr(QDA(), "row_plan")
    for model in (LinearSVM(), KernelSVM(), BayesianSVM(), LDA()):
        assert model.row_plan() is None
