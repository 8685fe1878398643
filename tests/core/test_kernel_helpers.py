"""Small helpers of the kernel fits that replace numpy's methods: the same floats to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from bsvm_core.kernels import resolve_gamma, variance
from bsvm_core.rbf_scoring import rbf_support_factor


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(60):
        n, d = int(rng.integers(1, 700)), int(rng.integers(1, 40))
        X = rng.standard_normal((n, d)) * 10 ** rng.uniform(-4, 4) + rng.uniform(-50, 50)
        out.append(X if rng.random() < 0.7 else np.asfortranarray(X))
    return out


@pytest.mark.parametrize("X", _arrays())
def test_variance_and_mean_are_numpys(X: np.ndarray) -> None:
    assert variance(X) == float(X.var())
    assert resolve_gamma("scale", X) == 1.0 / (X.shape[1] * float(X.var()))
    center, right = rbf_support_factor(X, 0.5)
    np.testing.assert_array_equal(center, X.mean(axis=0))
    np.testing.assert_allclose(right[:-2], (X - X.mean(axis=0)).T)


def _hard_arrays() -> list[np.ndarray]:
    """Large offsets and scales, views with strides and a lone column or row."""
    rng = np.random.default_rng(7)
    base = rng.standard_normal((301, 13))
    return [
        base * 1e30,
        base + 1e8,
        base * 1e-300,
        base[:, ::3],
        base[::4],
        base[:, :1],
        base[:1],
        np.asfortranarray(base)[5:, 2:],
    ]


@pytest.mark.parametrize("X", _hard_arrays())
def test_variance_is_numpys_to_the_bit_on_hard_arrays(X: np.ndarray) -> None:
    assert np.float64(variance(X)).tobytes() == np.float64(X.var()).tobytes()
