"""LDA and QDA fitted on row partitions equal the in-memory fit on the same rows (1e-10 relative)."""

from __future__ import annotations

import itertools
import pickle
import warnings

import numpy as np
import pytest

from bsvm_core.discriminant_sums import class_moments, merge_summaries, scatter_factor
from bsvm_core.exceptions import BsvmValueError, SingularCovarianceWarning
from bsvm_core.lda import LDA
from bsvm_core.partitions import ArrayPartitions, collect
from bsvm_core.qda import QDA

RTOL = 1e-10


def _data(n_classes: int, n: int = 600, d: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian classes far from the origin (the one-pass means must not lose digits to it)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    A = rng.normal(size=(d, d))
    X = 50.0 + rng.normal(size=(n, d)) @ A + 3.0 * y[:, None] + rng.normal(size=(1, d))
    return X, np.array(["a", "b", "c", "d"])[y]


def _layouts(X: np.ndarray, y: np.ndarray) -> dict[str, ArrayPartitions]:
    """Equal, unequal and tiny partitions, one of them without the class "a"."""
    no_a = np.flatnonzero(y != "a")[:40]
    rest = np.setdiff1d(np.arange(len(y)), no_a)
    cuts = [0, 1, 3, 4, 50, 51, 300, len(rest)]
    blocks = [(X[no_a], y[no_a])] + [
        (X[rest[a:b]], y[rest[a:b]]) for a, b in itertools.pairwise(cuts)
    ]
    return {
        "one": ArrayPartitions.split(X, y, 1),
        "seven": ArrayPartitions.split(X, y, 7),
        "uneven": ArrayPartitions(blocks),
    }


def _close(a: np.ndarray, b: np.ndarray) -> None:
    """Equal within RTOL of each entry, or of the array's scale for entries near zero."""
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * float(np.max(np.abs(b))))


def _same_rows(parts: ArrayPartitions) -> tuple[np.ndarray, np.ndarray]:
    return collect(parts)


@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("layout", ["one", "seven", "uneven"])
@pytest.mark.parametrize("params", [{}, {"priors": "given"}, {"tol": 0.3}])
def test_lda_partitions_equal_in_memory_fit(n_classes: int, layout: str, params: dict) -> None:
    X, y = _data(n_classes)
    X[:, 4] = X[:, 0] + 1e-7 * X[:, 1]  # near-collinear: tol=0.3 drops a direction
    if params.get("priors") == "given":
        params = {"priors": np.full(n_classes, 1.0 / n_classes)}
    parts = _layouts(X, y)[layout]
    Xs, ys = _same_rows(parts)
    ref = LDA(**params).fit(Xs, ys)
    ours = LDA(**params).fit_partitions(parts)
    np.testing.assert_array_equal(ours.classes_, ref.classes_)
    assert ours.n_features_in_ == ref.n_features_in_ and ours.rank_ == ref.rank_
    for name in ("means_", "covariance_", "priors_", "coef_", "intercept_"):
        _close(getattr(ours, name), getattr(ref, name))
    _close(ours.predict_proba(Xs), ref.predict_proba(Xs))
    _close(ours.decision_function(Xs), ref.decision_function(Xs))
    np.testing.assert_array_equal(ours.predict(Xs), ref.predict(Xs))
    again = pickle.loads(pickle.dumps(ours))
    np.testing.assert_array_equal(again.predict_proba(Xs), ours.predict_proba(Xs))


@pytest.mark.parametrize("n_classes", [2, 4])
@pytest.mark.parametrize("layout", ["one", "seven", "uneven"])
@pytest.mark.parametrize("reg_param", [0.0, 0.3])
def test_qda_partitions_equal_in_memory_fit(n_classes: int, layout: str, reg_param: float) -> None:
    X, y = _data(n_classes)
    parts = _layouts(X, y)[layout]
    Xs, ys = _same_rows(parts)
    ref = QDA(reg_param=reg_param).fit(Xs, ys)
    ours = QDA(reg_param=reg_param).fit_partitions(parts)
    for name in ("means_", "covariances_", "priors_", "scalings_", "reg_applied_"):
        _close(getattr(ours, name), getattr(ref, name))
    _close(ours.predict_log_proba(Xs), ref.predict_log_proba(Xs))
    _close(ours.decision_function(Xs), ref.decision_function(Xs))
    np.testing.assert_array_equal(ours.predict(Xs), ref.predict(Xs))


def test_qda_singleton_and_small_classes_match_in_memory() -> None:
    """A one-row class (pooled covariance) and a class with fewer rows than features (ridge)."""
    X, y = _data(2, n=300, d=6)
    X = np.vstack([X, 40.0 + np.arange(6.0)[None, :], 30.0 + np.eye(6)[:4]])
    y = np.r_[y, ["c"], ["d"] * 4]
    parts = ArrayPartitions([(X[:150], y[:150]), (X[150:302], y[150:302]), (X[302:], y[302:])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularCovarianceWarning)
        ref = QDA().fit(X, y)
    with pytest.warns(SingularCovarianceWarning, match="single sample"):
        ours = QDA().fit_partitions(parts)
    for name in ("means_", "covariances_", "priors_"):
        _close(getattr(ours, name), getattr(ref, name))
    _close(ours.reg_applied_, ref.reg_applied_)
    _close(ours.predict_log_proba(X), ref.predict_log_proba(X))


def test_merged_factors_are_the_pooled_scatter() -> None:
    """Chan's update on QR factors: R'R of the merge is the centred scatter of the union."""
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(7, 3)) + 1e6, rng.normal(size=(2, 3)) + 1e6 + 5.0
    summary = [(len(Z), Z.mean(axis=0), scatter_factor(Z - Z.mean(axis=0))) for Z in (A, B)]
    n, mean, R = merge_summaries(*summary)
    U = np.vstack([A, B])
    assert n == 9
    _close(mean, U.mean(axis=0))
    _close(R.T @ R, (U - U.mean(axis=0)).T @ (U - U.mean(axis=0)))


def test_partition_moments_are_one_pass_and_errors_are_clear() -> None:
    X, y = _data(3, n=200)

    class Counted(ArrayPartitions):
        passes = 0

        def map_gather(self, fn, *args):  # type: ignore[no-untyped-def]
            Counted.passes += 1
            return super().map_gather(fn, *args)

    parts = Counted([(X[:90], y[:90]), (X[90:], y[90:])])
    assert class_moments(parts).counts.sum() == 200
    LDA().fit_partitions(parts)
    assert Counted.passes == 2  # one pass each
    with pytest.raises(BsvmValueError, match="1 class"):
        LDA().fit_partitions(ArrayPartitions([(X[:5], np.full(5, "a"))]))
    bad = X[:10].copy()
    bad[3, 1] = np.nan
    with pytest.raises(BsvmValueError, match="NaN"):
        LDA().fit_partitions(ArrayPartitions([(bad, y[:10])]))
    with pytest.raises(BsvmValueError, match="priors"):
        LDA(priors=[0.5, 0.5]).fit_partitions(parts)
