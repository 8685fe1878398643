"""The checks and small steps of every SVM fit, against the plain computations they stand for:
the fit data's validation and range check in one pass, the kernel's range check, the seeds'
draw and numpy's einsum without its wrapper."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from bsvm_core import KernelSVM
from bsvm_core import _validation as validation
from bsvm_core._einsum import einsum
from bsvm_core._svm_base import _SEED_BOUND, _draw_seeds
from bsvm_core.exceptions import BsvmValueError, DataRangeError

FLOAT_MAX = float(np.finfo(np.float64).max)
RNG = np.random.default_rng(5)
X_PLAIN = RNG.standard_normal((30, 4))
Y_PLAIN = np.arange(30) % 3


def _outcome(check: Any, X: Any, y: Any) -> tuple[Any, ...]:
    """What a check returns or raises, and the attributes it leaves on a fresh estimator."""
    est = KernelSVM()
    try:
        Xc, yc = check(est, X, y)
    except (BsvmValueError, DataRangeError) as err:
        return type(err).__name__, str(err)
    return (
        Xc.dtype,
        Xc.tobytes(),
        np.asarray(yc).tolist(),
        est.n_features_in_,
        list(getattr(est, "feature_names_in_", [])),
    )


def _two_checks(est: Any, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    X, y = validation.check_fit_data(est, X, y)
    validation.check_squares_finite(X)
    return X, y


def _edge(n: int, d: int) -> float:
    """The largest |x| ``check_squares_finite`` lets through for n rows of d columns (about)."""
    return math.sqrt(FLOAT_MAX / (16.0 * n * d))


@pytest.mark.parametrize(
    "X, y",
    [
        (X_PLAIN, Y_PLAIN),
        (np.where(np.eye(30, 4) > 0, np.nan, X_PLAIN), Y_PLAIN),
        (np.where(np.eye(30, 4) > 0, np.inf, X_PLAIN), Y_PLAIN),
        (np.where(np.eye(30, 4) > 0, -np.inf, X_PLAIN), Y_PLAIN),
        (X_PLAIN * 1e160, Y_PLAIN),  # finite, squares overflow in sums
        (-X_PLAIN.clip(0.0) * 1e160, Y_PLAIN),  # the largest |x| negative
        (np.full((30, 4), _edge(30, 4) * 0.999), Y_PLAIN),  # just within the limit
        (np.full((30, 4), -_edge(30, 4) * 1.001), Y_PLAIN),  # just beyond it
        (np.zeros((30, 4)), Y_PLAIN),
        (X_PLAIN.astype(np.float32), Y_PLAIN),
        (X_PLAIN.tolist(), Y_PLAIN.tolist()),
        (pd.DataFrame(X_PLAIN, columns=list("abcd")), Y_PLAIN),
        (X_PLAIN, np.array(list("xyz"))[Y_PLAIN]),
        (X_PLAIN, np.linspace(0.0, 1.0, 30)),
        (X_PLAIN[:, :0], Y_PLAIN),
    ],
    ids=[
        "plain", "nan", "inf", "-inf", "overflow", "negative-overflow", "edge-within",
        "edge-beyond", "zeros", "float32", "lists", "frame", "strings", "float-y", "no-features",
    ],
)  # fmt: skip
def test_one_pass_check_is_the_two_checks(X: Any, y: Any) -> None:
    """``check_fit_data_and_range`` returns, raises and sets what ``check_fit_data`` then
    ``check_squares_finite`` do, whether or not it takes the extremes' shortcut."""
    assert _outcome(validation.check_fit_data_and_range, X, y) == _outcome(_two_checks, X, y)


def _reference_refuses(X: np.ndarray, kernel: str, gamma: float, C: float) -> bool:
    """``KernelSVM._check_kernel_range``'s rule written out for rbf and sigmoid (|K| ≤ 1)."""
    limit = FLOAT_MAX / 16.0
    s = float(np.max(np.sum(X * X, axis=1)))
    return 4.0 * gamma * s > limit or X.shape[0] * C > math.sqrt(limit)


@pytest.mark.parametrize("kernel", ["rbf", "sigmoid"])
@pytest.mark.parametrize("factor", [0.01, 0.5, 1.0, 1.01, 2.0, 8.0, 1e3, 1e6])
@pytest.mark.parametrize("n, d", [(8, 1), (40, 3), (200, 13)])
def test_kernel_range_refuses_what_its_rule_refuses(
    kernel: str, factor: float, n: int, d: int
) -> None:
    """With X at the edge of ``check_squares_finite`` and gamma around n/8 (below it the squared
    norms are not computed), the range check refuses exactly what its rule written out does."""
    X = np.full((n, d), _edge(n, d) * 0.999)
    X[::2] *= -1.0
    validation.check_squares_finite(X)
    gamma = factor * n / 8.0
    est = KernelSVM(kernel=kernel, gamma=gamma)
    est._gamma = gamma
    refused = _reference_refuses(X, kernel, gamma, 1.0)
    if refused:
        with pytest.raises(DataRangeError, match="overflows float64 in the kernel"):
            est._check_kernel_range(X)
    else:
        est._check_kernel_range(X)
    assert refused == (factor > 4.0)  # the bound the shortcut rests on: 4γs ≤ max/16 for γ ≤ n/4


def test_kernel_range_still_refuses_a_large_c() -> None:
    X = RNG.standard_normal((50, 3))
    est = KernelSVM(C=1e306)
    est._gamma = 0.1
    with pytest.raises(DataRangeError, match="in the dual objective"):
        est._check_kernel_range(X)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 10, 45])
def test_seeds_are_one_draw_of_k(k: int) -> None:
    """One scalar draw each gives the numbers, and the state, of one draw of k."""
    for seed in range(20):
        a, b = np.random.RandomState(seed), np.random.RandomState(seed)
        seeds = _draw_seeds(a, k)
        assert seeds == b.randint(_SEED_BOUND, size=k).tolist()
        assert all(type(s) is int for s in seeds)
        assert a.randint(_SEED_BOUND, size=4).tolist() == b.randint(_SEED_BOUND, size=4).tolist()


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("probability", [False, True])
def test_seeds_drawn_only_when_taken(n_classes: int, probability: bool) -> None:
    """KernelSVM's binary fits take no seed: without Platt folds its fit leaves the random state
    as it was; with them it draws one seed a problem, as before."""
    X = RNG.standard_normal((60, 3))
    y = np.arange(60) % n_classes
    state = np.random.RandomState(7)
    KernelSVM(probability=probability, random_state=state).fit(X, y)
    expected = np.random.RandomState(7)
    if probability:
        _draw_seeds(expected, 1 if n_classes == 2 else 3)
    assert (
        state.randint(_SEED_BOUND, size=4).tolist()
        == expected.randint(_SEED_BOUND, size=4).tolist()
    )


@pytest.mark.parametrize(
    "subscripts, shapes",
    [("ij,ij->i", [(7, 13), (7, 13)]), ("ij->j", [(60, 13)]), ("ij,ij->i", [(400, 2)] * 2)],
)
def test_einsum_is_numpys(subscripts: str, shapes: list[tuple[int, int]]) -> None:
    ops = [RNG.standard_normal(s) * 1e3 for s in shapes]
    expected = np.einsum(subscripts, *ops)
    assert einsum(subscripts, *ops).tobytes() == expected.tobytes()
    out = np.empty((3, expected.size))
    einsum(subscripts, *ops, out=out[1])
    assert out[1].tobytes() == expected.tobytes()
