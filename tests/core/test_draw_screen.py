"""The screen that rules draws out of a block's tails: its bound holds for the computed values."""

from __future__ import annotations

import numpy as np
import pytest

from bsvm_core import draw_screen, screened_quantiles
from bsvm_core.draw_quantiles import draw_moments, projection_quantiles


def _reference(X: np.ndarray, W: np.ndarray, b: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    Xt = np.column_stack([np.ones(X.shape[0]), X])
    return np.quantile(Xt @ np.vstack([b, W]), qs, axis=1)


def _dyadic(A: np.ndarray) -> np.ndarray:
    """Multiples of 1/8 (bounded): the products are exact whatever order BLAS sums them in."""
    return np.round(np.clip(A, -1e6, 1e6) * 8) / 8


def _cancelling(rng: np.random.Generator, G: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows (1, 1e8 + ε, 1e8 + ε') against draws whose two slopes nearly cancel: each value is a
    difference of terms about 1e8 times its spread, so the products round by far more than the
    rounding of the bound's own arithmetic."""
    a = rng.normal(size=G)
    Wt = np.vstack([rng.normal(size=G), a, -a + rng.normal(size=G) * 1e-6])
    Xt = np.column_stack([np.ones(40), 1e8 + rng.normal(size=(40, 2))])
    return Xt, Wt


def _violations(Xt: np.ndarray, Wt: np.ndarray, block: int) -> int:
    """Values x̃'w̃_g (BLAS) below μ + σ·lower_g − slack or above μ + σ·upper_g + slack, over
    k-d blocks of ``block`` rows."""
    centre, M2 = draw_moments(Wt)[:2]
    draws = draw_screen.whiten_draws(Wt, centre, M2)
    assert draws is not None
    unit, sigma, slack = draw_screen.row_axes(Xt, draws)
    mu = Xt @ centre
    bad = 0
    for rows in draw_screen.kd_blocks(unit, np.arange(Xt.shape[0]), block):
        lower, upper = draw_screen.block_bounds(unit[rows], draws)
        values = draw_screen.products(Xt[rows], Wt)
        m, s, sl = mu[rows, None], sigma[rows, None], slack[rows, None]
        below = screened_quantiles.tail_limit(m, s, sl, lower[None, :])
        above = -screened_quantiles.tail_limit(-m, s, sl, -upper[None, :])
        bad += int(np.count_nonzero(values < below) + np.count_nonzero(values > above))
    return bad


DRAWS = {
    "normal": lambda rng, G: rng.normal(size=(4, G)) * [[1.0], [5.0], [0.1], [2.0]],
    "correlated": lambda rng, G: np.cumsum(rng.normal(size=(4, G)), axis=0),
    "heavy_tailed": lambda rng, G: rng.standard_cauchy(size=(4, G)),
    "constant_slope": lambda rng, G: np.vstack([rng.normal(size=(3, G)), np.full((1, G), 0.5)]),
}


@pytest.mark.parametrize("kind", sorted(DRAWS))
@pytest.mark.parametrize("block", [1, 7, 64])
def test_bounds_hold_for_the_computed_values(kind: str, block: int) -> None:
    rng = np.random.default_rng(block)
    Wt = DRAWS[kind](rng, 3000)
    X = rng.normal(size=(300, 3)) * 4
    X[:20] *= 1e6  # rows of huge magnitude
    X[20:40] = 1e7 + rng.normal(size=(20, 3))  # huge rows of small spread among themselves
    assert _violations(np.column_stack([np.ones(300), X]), Wt, block) == 0


def test_the_rounding_slack_is_what_keeps_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values that nearly cancel: one-row blocks, whose bound is the value itself, fail it
    without the slack (the products round both ways); with it, nothing is ever below it."""
    Xt, Wt = _cancelling(np.random.default_rng(0), 2000)
    assert _violations(Xt, Wt, 1) == 0
    monkeypatch.setattr(draw_screen, "ROUNDING_FACTOR", 0.0)
    assert _violations(Xt, Wt, 1) > 0


def test_cancelling_rows_and_ties_give_numpys_quantiles() -> None:
    """Huge, nearly cancelling rows (exact dyadic products) and draws with point masses."""
    rng = np.random.default_rng(1)
    G = 3000
    a = _dyadic(rng.normal(size=G) * 8)
    W = np.vstack([a, -a + _dyadic(rng.normal(size=G)) * (rng.random(G) < 0.5)])
    b = _dyadic(rng.normal(size=G)) * (rng.random(G) < 0.3)  # ties at 0
    X = np.vstack(
        [
            2.0**22 + np.round(rng.normal(size=(150, 2)) * 64),  # huge, cancelling
            _dyadic(rng.normal(size=(150, 2)) * 4),
        ]
    )
    for qs in [(0.025, 0.975), (0.05, 0.95), (0.01, 0.2)]:
        got = projection_quantiles(X, W, b, qs, max_bytes=G * 10 * 16)
        np.testing.assert_array_equal(got, _reference(X, W, b, qs))


def test_the_screen_leaves_most_values_uncomputed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the screen: far fewer values computed than rows × draws, same numbers."""
    computed = []
    real = screened_quantiles.leaf_products

    def spy(Xt: np.ndarray, *args: object) -> np.ndarray:
        out = real(Xt, *args)  # type: ignore[arg-type]
        computed.append(out.size)
        return out

    monkeypatch.setattr(screened_quantiles, "leaf_products", spy)
    rng = np.random.default_rng(2)
    G = 4000
    W = _dyadic(rng.normal(size=(3, G)) * 8)
    b = _dyadic(rng.normal(size=G) * 8)
    X = _dyadic(rng.normal(size=(3000, 3)) * [4.0, 1.0, 0.25])
    got = projection_quantiles(X, W, b, (0.025, 0.975))
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))
    assert computed and sum(computed) < 0.4 * X.shape[0] * G


def whole_rows_spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the row sets that go whole from all draws (the pilot rows, which always do,
    not counted), appended as ``_whole_rows`` is called."""
    whole: list[int] = []
    real = screened_quantiles._whole_rows

    def spy(problem: object, rows: np.ndarray, *pilots: bool) -> np.ndarray:
        if not any(pilots):
            whole.append(rows.size)
        return real(problem, rows, *pilots)  # type: ignore[arg-type]

    monkeypatch.setattr(screened_quantiles, "_whole_rows", spy)
    return whole


@pytest.mark.parametrize("threads", [1, 2])
def test_rows_the_screened_limits_miss_go_whole(
    monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    """Screen margins far too small: limits inside the tails, rows missed, redone from all draws
    (the pilot rows, which always are, not counted)."""
    whole = whole_rows_spy(monkeypatch)
    monkeypatch.setattr(screened_quantiles, "SCREEN_MARGIN", -1.0)
    rng = np.random.default_rng(3)
    W, b = _dyadic(rng.standard_t(3, size=(3, 3000)) * 8), _dyadic(rng.normal(size=3000) * 8)
    X = _dyadic(rng.normal(size=(1000, 3)) * 4)
    got = projection_quantiles(X, W, b, (0.025, 0.975), n_threads=threads)
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))
    assert sum(whole) > 500  # most rows


@pytest.mark.parametrize("half", [-1.0, 0.0, 0.01])
def test_rows_the_band_misses_are_selected_again_up_to_the_screen_limit(
    monkeypatch: pytest.MonkeyPatch, half: float
) -> None:
    """Bands empty (or a sliver): every row, or most, selected again from (−∞, τ]; exact, and only
    the few rows the screen itself misses go whole."""
    whole = whole_rows_spy(monkeypatch)
    monkeypatch.setattr(screened_quantiles, "BAND_HALF", half)
    rng = np.random.default_rng(7)
    W, b = rng.normal(size=(3, 3000)) * [[1.0], [3.0], [0.5]], rng.normal(size=3000)
    X = rng.normal(size=(700, 3)) * 2
    got = projection_quantiles(X, W, b, (0.025, 0.975), n_threads=2)
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))
    assert sum(whole) <= 0.01 * X.shape[0]


def test_kd_blocks_cover_each_row_once() -> None:
    unit = np.random.default_rng(4).normal(size=(1000, 5))
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    rows = np.flatnonzero(np.arange(1000) % 7 != 0)
    blocks = draw_screen.kd_blocks(unit, rows, 50)
    np.testing.assert_array_equal(np.sort(np.concatenate(blocks)), rows)
    assert max(b.size for b in blocks) <= 50


def test_leaf_products_equal_the_whole_product_bit_for_bit() -> None:
    """The kept draws' values are those of the whole matrix's gemm (real-valued data): leaves of
    consecutive rows (one-row leaves among them) against their own padded columns, taken from
    one gathered matrix."""
    rng = np.random.default_rng(5)
    Wt, Xt = rng.normal(size=(5, 3000)), rng.normal(size=(70, 5)) * 10
    F = Xt @ Wt
    for sizes in [[1], [2], [5, 1, 64], [70], [3, 17, 1, 1, 48]]:
        sizes_ = np.array(sizes)
        counts = rng.integers(1, 2985, sizes_.size)
        widths = counts + (-counts % draw_screen.COLUMN_MULTIPLE)
        columns = [rng.choice(3000, w, replace=False) for w in widths]
        Wk = np.take(Wt, np.concatenate(columns), axis=1)
        rows = np.arange(sizes_.sum())
        out = np.empty(int(sizes_ @ widths) + 7)
        got = draw_screen.leaf_products(Xt[rows], Wk, sizes_, widths, out)
        at, row = 0, 0
        for size, width, cols in zip(sizes, widths, columns, strict=True):
            block = got[at : at + size * width].reshape(size, width)
            np.testing.assert_array_equal(block, F[row : row + size][:, cols])
            at, row = at + size * width, row + size
        assert at == got.size
    np.testing.assert_array_equal(draw_screen.products(Xt[3:4], Wt), F[3:4])


def test_draws_without_spread_are_not_whitened() -> None:
    Wt = np.full((3, 100), 2.0)
    centre, M2 = draw_moments(Wt)[:2]
    assert draw_screen.whiten_draws(Wt, centre, M2) is None


def test_without_the_screen_every_value_is_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``screen=False`` (the bench's before) takes the whole-row path, with the same numbers."""

    def no_screen(*args: object) -> None:
        raise AssertionError("screened")

    rng = np.random.default_rng(6)
    W, b = _dyadic(rng.normal(size=(3, 2000)) * 8), _dyadic(rng.normal(size=2000) * 8)
    X = _dyadic(rng.normal(size=(500, 3)) * 4)
    screened = projection_quantiles(X, W, b, (0.025, 0.975))
    monkeypatch.setattr(screened_quantiles, "screened_statistics", no_screen)
    got = projection_quantiles(X, W, b, (0.025, 0.975), screen=False)
    np.testing.assert_array_equal(got, screened)
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))


@pytest.mark.parametrize("screen", [-1.0, -0.1, 0.0, 0.3])
@pytest.mark.parametrize("half", [-0.1, 0.005, 0.045, 0.5])
def test_any_margins_give_numpys_quantiles(
    monkeypatch: pytest.MonkeyPatch, screen: float, half: float
) -> None:
    """The margins only move work between the band, the second bands and whole rows: with screen
    limits inside the tails and bands narrow, wide or inverted, the numbers stay numpy's."""
    monkeypatch.setattr(screened_quantiles, "SCREEN_MARGIN", screen)
    monkeypatch.setattr(screened_quantiles, "BAND_HALF", half)
    rng = np.random.default_rng(8)
    W, b = rng.standard_t(4, size=(3, 2000)) * [[1.0], [3.0], [0.5]], rng.normal(size=2000)
    X = rng.normal(size=(300, 3)) * 2
    for qs in [(0.025, 0.975), (0.01, 0.05, 0.9)]:
        got = projection_quantiles(X, W, b, qs, n_threads=2)
        np.testing.assert_array_equal(got, _reference(X, W, b, qs))


def test_a_batch_over_the_memory_budget_goes_in_halves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept values beyond the per-thread budget: a batch's leaves go in halves, down to one leaf
    at a time; the numbers stay numpy's."""
    leaves_per_call = []
    real = screened_quantiles.leaf_products

    def spy(Xt: np.ndarray, Wk: np.ndarray, sizes: np.ndarray, *args: object) -> np.ndarray:
        leaves_per_call.append(sizes.size)
        return real(Xt, Wk, sizes, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(screened_quantiles, "leaf_products", spy)
    monkeypatch.setattr(screened_quantiles, "BYTES_PER_KEPT", 10**9)
    rng = np.random.default_rng(9)
    W, b = rng.normal(size=(3, 2000)), rng.normal(size=2000)
    X = rng.normal(size=(400, 3)) * 2
    got = projection_quantiles(X, W, b, (0.025, 0.975), n_threads=2)
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))
    assert leaves_per_call and max(leaves_per_call) == 1


def test_rows_beyond_a_chunk_go_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """More rows than ``CHUNK_ROWS``: equal chunks one after another, the same numbers; a problem
    without spread still goes unscreened."""
    monkeypatch.setattr(screened_quantiles, "CHUNK_ROWS", 100)
    rng = np.random.default_rng(10)
    W, b = rng.normal(size=(3, 2000)), rng.normal(size=2000)
    X = rng.normal(size=(350, 3)) * 2
    got = projection_quantiles(X, W, b, (0.025, 0.975), n_threads=2)
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))
    flat, level = np.full((3, 2000), 0.5), np.full(2000, 0.25)
    got = projection_quantiles(X, flat, level, (0.025, 0.975))
    np.testing.assert_array_equal(got, _reference(X, flat, level, (0.025, 0.975)))


@pytest.mark.parametrize("qs", [(0.9,), (0.8, 0.95), (0.76, 0.999), (0.1,), (0.001, 0.02, 0.98)])
def test_one_tail_and_wide_spans_give_numpys_quantiles(qs: tuple[float, ...]) -> None:
    """Quantiles in the upper tail alone (its screen is the batch's upper bound, whatever the
    side's place in the list), the lower alone, and depths far apart in one tail."""
    rng = np.random.default_rng(11)
    W, b = rng.normal(size=(4, 2000)), rng.normal(size=2000)
    X = rng.normal(size=(300, 4))
    for threads in (1, 2):
        got = projection_quantiles(X, W, b, qs, n_threads=threads)
        np.testing.assert_array_equal(got, _reference(X, W, b, qs))
