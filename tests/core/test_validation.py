"""check_fit_data's plain-array shortcut against scikit-learn's full checks."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from bsvm_core import LDA, KernelSVM, LinearSVM
from bsvm_core import _validation as validation
from bsvm_core.exceptions import BsvmValueError

RNG = np.random.default_rng(0)
X_PLAIN = RNG.standard_normal((40, 3))


def _both_ways(monkeypatch, estimator_factory, X, y):
    """(estimator, X, y, warnings) through the shortcut and through scikit-learn's checks."""
    out = []
    for shortcut in (True, False):
        with monkeypatch.context() as m:
            if not shortcut:
                m.setattr(validation, "_plain_fit_data", lambda X, y: False)
            est = estimator_factory()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    result = validation.check_fit_data(est, X, y)
                except BsvmValueError as err:
                    result = err
            out.append((est, result, [str(w.message) for w in caught]))
    return out


@pytest.mark.parametrize(
    "y",
    [
        np.arange(40) % 2,
        (np.arange(40) % 3).astype(np.int8),
        (np.arange(40) % 4).astype(np.uint32),
        np.full(40, 7),  # one class: the estimators refuse it later, the check does not
    ],
    ids=["int64", "int8", "uint32", "one-class"],
)
def test_plain_arrays_get_what_the_full_checks_give(monkeypatch, y) -> None:
    fast, full = _both_ways(monkeypatch, KernelSVM, X_PLAIN, y)
    assert validation._plain_fit_data(X_PLAIN, y)
    (Xf, yf), (Xs, ys) = fast[1], full[1]
    np.testing.assert_array_equal(Xf, Xs)
    np.testing.assert_array_equal(yf, ys)
    assert yf.dtype == ys.dtype
    assert fast[0].n_features_in_ == full[0].n_features_in_ == 3
    assert fast[2] == full[2] == []


@pytest.mark.parametrize(
    "X, y",
    [
        (X_PLAIN, np.linspace(0.0, 1.0, 40)),  # continuous targets: refused
        (X_PLAIN, (np.arange(40) % 2).reshape(-1, 1)),  # a column: warned and raveled
        (X_PLAIN, np.arange(39) % 2),  # lengths differ
        (np.where(np.eye(40, 3) > 0, np.nan, X_PLAIN), np.arange(40) % 2),  # NaN
        (X_PLAIN.astype(np.float32), np.arange(40) % 2),  # converted to float64
        (X_PLAIN[:, :0], np.arange(40) % 2),  # no features
        (X_PLAIN, np.array([2**64 - 1, 3] * 20, dtype=np.uint64)),  # beyond int64: exact
        (X_PLAIN, np.array([True, False] * 20)),
    ],
    ids=["float-y", "column-y", "lengths", "nan", "float32", "no-features", "uint64", "bool"],
)
def test_other_inputs_take_the_full_checks(monkeypatch, X, y) -> None:
    assert not validation._plain_fit_data(X, y)
    fast, full = _both_ways(monkeypatch, KernelSVM, X, y)
    if isinstance(full[1], Exception):
        assert type(fast[1]) is type(full[1]) and str(fast[1]) == str(full[1])
    else:
        np.testing.assert_array_equal(fast[1][0], full[1][0])
        np.testing.assert_array_equal(fast[1][1], full[1][1])
    assert fast[2] == full[2]


@pytest.mark.parametrize("factory", [KernelSVM, LinearSVM, LDA])
def test_a_plain_refit_forgets_feature_names(factory) -> None:
    y = np.arange(40) % 2
    est = factory().fit(pd.DataFrame(X_PLAIN, columns=["a", "b", "c"]), y)
    assert list(est.feature_names_in_) == ["a", "b", "c"]
    est.fit(X_PLAIN, y)
    assert not hasattr(est, "feature_names_in_")
    assert est.n_features_in_ == 3
    est.predict(X_PLAIN)  # no feature-name warning or error either


@pytest.mark.parametrize(
    "y",
    [
        np.array([0, 1, 2, 1, 0]),
        np.array([2, 1, 2], dtype=np.int8),
        np.array([-128, 127, -128], dtype=np.int8),  # a gap: np.unique's path
        np.array([-3, -2, -1, -2], dtype=np.int32),
        np.array([5, 6, 5], dtype=np.uint16),
        np.array([0, 3, 3, 0]),  # gaps within the range
        np.array([1, 0, 1, 1, 0, 0], dtype=np.uint8)[::2],  # not contiguous
        np.array([7, 7, 8, 9, 9, 8, 7]),
    ],
)
def test_encode_labels_equals_numpy_unique(y) -> None:
    """Consecutive integer labels are counted, not sorted: same classes, dtypes and indices."""
    classes, y_idx = validation.encode_labels(y)
    ref_classes, ref_idx = np.unique(y, return_inverse=True)
    assert classes.dtype == ref_classes.dtype and y_idx.dtype == ref_idx.dtype
    np.testing.assert_array_equal(classes, ref_classes)
    np.testing.assert_array_equal(y_idx, ref_idx)
