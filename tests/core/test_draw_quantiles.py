"""Blocked quantiles of x̃'w̃_g over draws: equal to numpy's quantile of the full matrix."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris

from bsvm_core import draw_quantiles
from bsvm_core.bayesian_svm import BayesianSVM
from bsvm_core.draw_quantiles import (
    _partition,
    block_rows,
    linear_positions,
    projection_quantiles,
)


def _reference(X: np.ndarray, W: np.ndarray, b: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    Xt = np.column_stack([np.ones(X.shape[0]), X])
    return np.quantile(Xt @ np.vstack([b, W]), qs, axis=1)


def _dyadic(A: np.ndarray) -> np.ndarray:
    """Round to multiples of 1/8 (bounded): every product and sum below is exact in float64,
    so the matrix products agree bit for bit whatever order BLAS sums them in."""
    return np.round(np.clip(A, -1e6, 1e6) * 8) / 8


DRAWS = {
    "normal": lambda rng, d, G: rng.normal(size=(d, G)) * 30,
    "heavy_tailed": lambda rng, d, G: rng.standard_cauchy(size=(d, G)),
    "point_masses": lambda rng, d, G: rng.normal(size=(d, G)) * 30 * (rng.random((d, G)) < 0.3),
    "ties": lambda rng, d, G: rng.normal(size=(d, G)),
    "skewed": lambda rng, d, G: rng.exponential(size=(d, G)) ** 3,
}


@pytest.mark.parametrize("kind", sorted(DRAWS))
@pytest.mark.parametrize("G", [4, 7, 60, 3001])
@pytest.mark.parametrize("qs", [(0.025, 0.975), (0.05, 0.95), (0.3, 0.7), (0.0005, 0.9995)])
def test_equals_numpy_quantile_of_the_full_matrix(kind: str, G: int, qs: tuple) -> None:
    rng = np.random.default_rng(G)
    X = _dyadic(rng.normal(size=(57, 3)) * 4)
    X[:5] = 0.0  # rows whose values are the intercept draws alone
    W, b = _dyadic(DRAWS[kind](rng, 3, G)), _dyadic(DRAWS[kind](rng, 1, G)[0])
    got = projection_quantiles(X, W, b, qs, max_bytes=G * 10 * 8)  # blocks of 8 rows
    np.testing.assert_array_equal(got, _reference(X, W, b, qs))


def test_real_valued_draws_agree_to_rounding() -> None:
    rng = np.random.default_rng(3)
    X, W, b = rng.normal(size=(200, 5)), rng.normal(size=(5, 4000)), rng.normal(size=4000)
    got = projection_quantiles(X, W, b, (0.025, 0.975), max_bytes=1e6)
    np.testing.assert_allclose(got, _reference(X, W, b, (0.025, 0.975)), rtol=1e-13, atol=1e-13)


def test_threshold_misses_fall_back_to_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    X, W, b = (_dyadic(rng.normal(size=s) * 16) for s in [(40, 2), (2, 5000), (5000,)])
    monkeypatch.setattr(draw_quantiles, "MARGIN_SD", -6.0)  # thresholds inside the tails
    got = projection_quantiles(X, W, b, (0.025, 0.975))
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))


def test_threads_and_budgets_give_the_same_numbers() -> None:
    rng = np.random.default_rng(2)
    X, W, b = (_dyadic(rng.normal(size=s) * 16) for s in [(301, 4), (4, 2000), (2000,)])
    reference = _reference(X, W, b, (0.05, 0.95))
    for max_bytes, threads in [(1, 1), (1e5, 2), (1e9, 3)]:
        got = projection_quantiles(X, W, b, (0.05, 0.95), max_bytes, threads)
        np.testing.assert_array_equal(got, reference)


def test_block_rows_respects_the_budget() -> None:
    assert block_rows(8000, 1) == 1
    assert block_rows(8000, 8000 * draw_quantiles.BYTES_PER_VALUE * 3) == 3
    assert block_rows(8000, 1e12) * 8000 * 8 <= draw_quantiles.CACHE_BLOCK_BYTES


def test_linear_positions_are_numpys_type_7() -> None:
    assert linear_positions(8000, 0.025) == (199, 200, pytest.approx(0.975))
    assert linear_positions(5, 1.0) == (4, 4, 0.0)


@pytest.mark.parametrize("binary", [True, False])
def test_predict_interval_is_the_quantile_of_x_beta(binary: bool) -> None:
    X, y = load_iris(return_X_y=True)
    if binary:
        y = (y == 2).astype(int)
    est = BayesianSVM(method="mcmc", n_draws=120, burn_in=30, n_chains=2, random_state=0)
    est.fit(X, y)
    lower, upper = est.predict_interval(X, level=0.9, max_bytes=50_000)
    coef = est.coef_draws_.reshape(240, -1, 4)
    f = np.einsum("nd,gcd->ngc", X, coef) + est.intercept_draws_.reshape(240, -1)
    lo_ref, hi_ref = np.quantile(f, [0.05, 0.95], axis=1)
    assert lower.shape == upper.shape == ((150,) if binary else (150, 3))
    np.testing.assert_allclose(lower, lo_ref.squeeze(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(upper, hi_ref.squeeze(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ranks", [[3, 4], [0, 1, 2, 30, 31], [5, 6, 20, 21], [31], [0, 31]])
def test_partition_selects_consecutive_and_distant_ranks(ranks: list[int]) -> None:
    """Regression: a rank taken as the minimum after the previous one must also be put in its
    place, or the next partition works on the wrong set of values."""
    rng = np.random.default_rng(len(ranks))
    F = rng.normal(size=(50, 32))
    expected = np.sort(F, axis=1)[:, ranks]
    np.testing.assert_array_equal(_partition(F.copy(), ranks), expected)


def test_guided_thresholds_on_real_draws_are_exact_across_blocks() -> None:
    """Blocks after the first use thresholds learnt from the previous block (mean ± z SD)."""
    rng = np.random.default_rng(4)
    X = _dyadic(rng.normal(size=(300, 3)) * 8)
    W, b = _dyadic(rng.standard_t(3, size=(3, 4000)) * 8), _dyadic(rng.normal(size=4000) * 8)
    got = projection_quantiles(X, W, b, (0.025, 0.975), max_bytes=4000 * 10 * 16)
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))


def test_tail_guide_moments_are_those_of_the_row_values() -> None:
    """Mean, SD, skewness and kurtosis from the draws' moment tensors equal those of x̃'w̃_g."""
    rng = np.random.default_rng(5)
    Wt = rng.exponential(size=(4, 3000)) ** 2
    Xt = np.column_stack([np.ones(6), rng.normal(size=(6, 3))])
    F = Xt @ Wt
    mu, sd, g_lo, g_hi = draw_quantiles.tail_guide(
        Xt, draw_quantiles.draw_moments(Wt), (75, 75), 3000
    )
    np.testing.assert_allclose(mu, F.mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(sd, F.std(axis=1), rtol=1e-10)
    S = (F - F.mean(axis=1, keepdims=True)) / F.std(axis=1, keepdims=True)
    skew, kurt = (S**3).mean(axis=1), (S**4).mean(axis=1) - 3
    expected = draw_quantiles.cornish_fisher(-1.959963984540054, skew, kurt)
    np.testing.assert_allclose(g_lo, expected, rtol=1e-9)
    expected_hi = draw_quantiles.cornish_fisher(1.959963984540054, skew, kurt)
    np.testing.assert_allclose(g_hi, expected_hi, rtol=1e-9)


def test_predict_interval_without_n_jobs_uses_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """n_jobs=None: one thread per core (at most 4); an explicit n_jobs is kept."""
    X, y = load_iris(return_X_y=True)
    est = BayesianSVM(method="mcmc", n_draws=40, burn_in=10, n_chains=2, random_state=0)
    with pytest.warns(Warning):
        est.fit(X, (y == 2).astype(int))
    seen: list[int] = []
    original = draw_quantiles.stacked_projection_quantiles

    def spy(*args: object) -> np.ndarray:
        seen.append(int(args[-1]))  # type: ignore[call-overload]
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(draw_quantiles.os, "cpu_count", lambda: 16)
    monkeypatch.setattr("bsvm_core.bayesian_summary.stacked_projection_quantiles", spy)
    default = est.predict_interval(X)
    est.n_jobs = 1
    for got, expected in zip(est.predict_interval(X), default, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert seen == [4, 1]


@pytest.mark.parametrize("ulps", [-2, -1, 0, 1, 2])
@pytest.mark.parametrize("spare", [-1, 0, 3])
def test_select_beyond_with_thresholds_on_and_next_to_values(ulps: int, spare: int) -> None:
    """Thresholds at (or a few ulps from) the row's own values: exact where enough candidates lie
    beyond them, reported missed otherwise; ties at the thresholds included."""
    rng = np.random.default_rng([ulps + 2, spare + 1])
    G, ranks = 2000, [49, 50, 1949, 1950]
    values = np.round(rng.normal(size=(40, G)) * 64) / 64  # many ties
    values[:5] = 1.0  # point masses
    ordered = np.sort(values, axis=1)
    t_lo, t_hi = ordered[:, 50 + spare].copy(), ordered[:, 1949 - spare].copy()
    for _ in range(abs(ulps)):
        t_lo = np.nextafter(t_lo, np.sign(ulps) * np.inf)
        t_hi = np.nextafter(t_hi, -np.sign(ulps) * np.inf)
    mask = np.empty((2, *values.shape), dtype=bool)
    out, missed = draw_quantiles.select_beyond(values.copy(), ranks, t_lo, t_hi, mask)
    lo_col, hi_col = t_lo[:, None], t_hi[:, None]
    n_low = np.count_nonzero(values <= lo_col, axis=1)
    n_high = np.count_nonzero(values >= hi_col, axis=1)
    np.testing.assert_array_equal(out[~missed], ordered[~missed][:, ranks])
    assert not np.any(missed & (n_low >= 51) & (n_high >= 51))  # enough beyond: never missed
    assert np.all(missed[5:] == ((n_low < 51) | (n_high < 51))[5:])


@pytest.mark.parametrize("n_threads", [1, 2])
def test_products_run_on_one_blas_thread_whatever_the_threads(
    n_threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thin products never use BLAS's own threads, also with one thread of ours."""
    from threadpoolctl import threadpool_info

    seen: list[list[int]] = []
    real_matmul = np.matmul

    def spy(*args: object, **kwargs: object) -> np.ndarray:
        seen.append([lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"])
        return real_matmul(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(draw_quantiles.np, "matmul", spy)
    rng = np.random.default_rng(0)
    X, W, b = rng.normal(size=(50, 3)), rng.normal(size=(3, 400)), rng.normal(size=400)
    got = projection_quantiles(X, W, b, (0.025, 0.975), n_threads=n_threads)
    monkeypatch.setattr(draw_quantiles.np, "matmul", real_matmul)
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))
    assert seen and all(threads == [1] * len(threads) for threads in seen)
