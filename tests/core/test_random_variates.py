"""The stable inverse-Gaussian and truncated-normal samplers against their CDFs (KS tests)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from bsvm_core.random_variates import truncated_normal, wald_inverse_mean, wald_stable

N = 20_000
P_MIN = 1e-3  # fixed seeds: deterministic; a correct sampler fails this with probability 1e-3


def invgauss_cdf(x: np.ndarray, mean: float, shape: float) -> np.ndarray:
    """IG(mean, shape) CDF written out (Chhikara & Folks 1989), in log space for huge means."""
    root = np.sqrt(shape / x)
    first = special.ndtr(root * (x / mean - 1.0))
    # exp(2 shape/mean) Φ(−root (x/mean + 1)), combined in logs to avoid overflow
    second = np.exp(2.0 * shape / mean + special.log_ndtr(-root * (x / mean + 1.0)))
    return first + second


@pytest.mark.parametrize("mean", [0.5, 3.0, 1e3, 1e14])
@pytest.mark.parametrize("shape", [1.0, 2.5])
def test_wald_matches_inverse_gaussian_cdf(mean: float, shape: float) -> None:
    rng = np.random.default_rng(12345)
    x = wald_stable(np.full(N, mean), shape, rng)
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    assert stats.kstest(x, lambda t: invgauss_cdf(t, mean, shape)).pvalue > P_MIN
    if mean < 1e6:  # scipy's own invgauss is exact here: a second, independent reference
        ref = stats.invgauss(mu=mean / shape, scale=shape)
        assert stats.kstest(x, ref.cdf).pvalue > P_MIN


@pytest.mark.parametrize("shape", [1.0, 2.5])
def test_wald_infinite_mean_is_levy(shape: float) -> None:
    # IG(mean → ∞, shape) → Lévy(0, shape): the law of shape / Z² (bayes-svm.md §3.2)
    rng = np.random.default_rng(7)
    x = wald_stable(np.full(N, np.inf), shape, rng)
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    assert stats.kstest(x, stats.levy(scale=shape).cdf).pvalue > P_MIN
    # the limit formula agrees with the written-out IG CDF at a huge mean
    grid = np.array([0.1, 1.0, 10.0, 1e3])
    np.testing.assert_allclose(invgauss_cdf(grid, 1e300, shape), stats.levy(scale=shape).cdf(grid))


def test_wald_mixed_means_and_inverse_mean_form() -> None:
    means = np.array([0.5, 3.0, 1e3, 1e14, 1e20, np.inf])
    x = wald_stable(np.tile(means, 5000), 1.0, np.random.default_rng(3)).reshape(5000, -1)
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    np.testing.assert_allclose(x[:, :2].mean(axis=0), means[:2], rtol=0.05)
    # wald_inverse_mean(1/mean) is the same stream
    y = wald_inverse_mean(1.0 / np.tile(means, 5000), 1.0, np.random.default_rng(3))
    np.testing.assert_array_equal(x.ravel(), y)


def truncnorm_cdf(x: np.ndarray, mean: float, lo: float, hi: float) -> np.ndarray:
    """CDF of N(mean, 1) on (lo, hi) from log-survival functions (valid far in the upper tail)."""
    a, b, z = lo - mean, hi - mean, x - mean
    if a > 0:
        log_sa, log_sb = special.log_ndtr(-a), special.log_ndtr(-b)
        return (1.0 - np.exp(special.log_ndtr(-z) - log_sa)) / (1.0 - np.exp(log_sb - log_sa))
    return stats.truncnorm(a, b).cdf(z)


@pytest.mark.parametrize(
    ("mean", "lo", "hi"),
    [
        (0.0, -np.inf, np.inf),
        (0.0, 1.0, 2.0),
        (3.0, -0.5, 0.1),
        (-50.0, -1.0, np.inf),
        (0.0, 30.0, 31.0),
        (0.0, -41.0, -40.0),
        (2.0, -np.inf, 1.5),
    ],
)
def test_truncated_normal_matches_cdf(mean: float, lo: float, hi: float) -> None:
    rng = np.random.default_rng(99)
    x = truncated_normal(np.full(N // 4, mean), 1.0, lo, hi, rng)
    assert np.all(x >= lo) and np.all(x <= hi)
    if hi < 0:  # mirror the lower tail into the upper one for the reference
        assert stats.kstest(-x, lambda t: truncnorm_cdf(t, -mean, -hi, -lo)).pvalue > P_MIN
    else:
        assert stats.kstest(x, lambda t: truncnorm_cdf(t, mean, lo, hi)).pvalue > P_MIN


def test_truncated_normal_scale() -> None:
    x = truncated_normal(np.full(5000, 1.0), 3.0, 0.0, np.inf, np.random.default_rng(1))
    ref = stats.truncnorm((0.0 - 1.0) / 3.0, np.inf, loc=1.0, scale=3.0)
    assert stats.kstest(x, ref.cdf).pvalue > P_MIN
