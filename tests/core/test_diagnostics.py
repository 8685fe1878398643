"""ESS and R-hat against chains with known autocorrelation and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from bsvm_core import diagnostics as dg


def ar1(rho: float, chains: int, n: int, seed: int) -> np.ndarray:
    """Stationary Gaussian AR(1) chains x_t = rho x_{t-1} + sqrt(1 - rho²) e_t."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((chains, n))
    x = np.empty((chains, n))
    x[:, 0] = e[:, 0]
    scale = np.sqrt(1.0 - rho**2)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + scale * e[:, t]
    return x


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9, -0.3])
def test_ess_of_ar1_chains(rho: float) -> None:
    chains, n = 4, 10_000
    x = ar1(rho, chains, n, seed=int(100 * (rho + 1)))
    expected = chains * n * (1.0 - rho) / (1.0 + rho)  # integrated autocorrelation of AR(1)
    assert dg.ess_bulk(x) == pytest.approx(expected, rel=0.12)
    assert dg.ess_basic(x) == pytest.approx(expected, rel=0.12)
    assert dg.rhat_rank(x) < 1.01


def test_autocovariance_matches_direct_sum() -> None:
    x = np.random.default_rng(0).standard_normal((2, 50))
    acov = dg.autocovariance(x)
    c = x - x.mean(axis=1, keepdims=True)
    for lag in (0, 1, 7, 49):
        direct = np.sum(c[:, : 50 - lag] * c[:, lag:], axis=1) / 50
        np.testing.assert_allclose(acov[:, lag], direct, atol=1e-12)


def test_rhat_basic_hand_computed() -> None:
    # chain means 1 and 3, within variances 4/3: W = 4/3, B/n = 2, var+ = 3/4 W + 2 = 3,
    # R-hat = sqrt(3 / (4/3)) = 1.5
    x = np.array([[0.0, 2.0, 0.0, 2.0], [2.0, 4.0, 2.0, 4.0]])
    assert dg.rhat_basic(x) == pytest.approx(1.5)


def test_split_and_rank_normalise_hand_computed() -> None:
    x = np.array([[1.0, 2.0, 3.0, 4.0, 5.0], [10.0, 20.0, 30.0, 40.0, 50.0]])
    split = dg.split_chains(x)  # odd length: middle draw dropped
    np.testing.assert_array_equal(split, [[1, 2], [10, 20], [4, 5], [40, 50]])
    z = dg.rank_normalise(np.array([[3.0, 1.0], [2.0, 2.0]]))
    ranks = np.array([[4.0, 1.0], [2.5, 2.5]])
    np.testing.assert_allclose(z, stats.norm.ppf((ranks - 0.375) / 4.25))


def reference_rhat_rank(x: np.ndarray) -> float:
    """Vehtari et al. (2021) written out step by step, independently of bsvm_core."""
    m, n = x.shape
    half = n // 2
    parts = [x[c, :half] for c in range(m)] + [x[c, n - half :] for c in range(m)]

    def rhat(chains: list[np.ndarray]) -> float:
        means = [c.mean() for c in chains]
        w = sum(c.var(ddof=1) for c in chains) / len(chains)
        b = half * np.var(means, ddof=1)
        return float(np.sqrt(((half - 1) / half * w + b / half) / w))

    def znorm(chains: list[np.ndarray]) -> list[np.ndarray]:
        flat = np.concatenate(chains)
        r = stats.rankdata(flat)
        z = special.ndtri((r - 3 / 8) / (flat.size + 1 / 4))
        return np.split(z, len(chains))

    med = np.median(np.concatenate(parts))
    return max(rhat(znorm(parts)), rhat(znorm([np.abs(p - med) for p in parts])))


def test_rhat_detects_shifted_and_overdispersed_chains() -> None:
    rng = np.random.default_rng(5)
    shifted = rng.standard_normal((4, 1001)) + np.array([[0.0], [0.0], [0.0], [1.0]])
    assert dg.rhat_rank(shifted) == pytest.approx(reference_rhat_rank(shifted), rel=1e-12)
    assert dg.rhat_rank(shifted) > 1.05
    # same location, different scales: the bulk R-hat misses it, the folded one does not
    scaled = rng.standard_normal((4, 1000)) * np.array([[1.0], [1.0], [1.0], [3.0]])
    assert dg.rhat_basic(dg.rank_normalise(dg.split_chains(scaled))) < 1.02
    assert dg.rhat_rank(scaled) == pytest.approx(reference_rhat_rank(scaled), rel=1e-12)
    assert dg.rhat_rank(scaled) > 1.05
    # a trend inside each chain is caught by splitting
    trend = rng.standard_normal((4, 1000)) + np.linspace(0.0, 2.0, 1000)
    assert dg.rhat_rank(trend) > 1.1


def test_ess_tail_and_mcse() -> None:
    x = ar1(0.5, 4, 5000, seed=3)
    assert 0.5 * 20000 / 3 < dg.ess_tail(x) < 1.5 * 20000
    assert dg.mcse_mean(x) == pytest.approx(np.std(x) / np.sqrt(20000 / 3), rel=0.15)


def test_bad_shapes_raise() -> None:
    with pytest.raises(ValueError, match="at least 4"):
        dg.ess_bulk(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="shape"):
        dg.rhat_rank(np.zeros((2, 3, 4)))
