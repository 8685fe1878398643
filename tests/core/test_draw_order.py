"""Rows grouped by axis and the draws laid out in a group's order: same numbers, longer runs."""

from __future__ import annotations

import numpy as np
import pytest

from bsvm_core import draw_order, draw_quantiles
from bsvm_core.draw_quantiles import draw_moments, projection_quantiles


def _reference(X: np.ndarray, W: np.ndarray, b: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    Xt = np.column_stack([np.ones(X.shape[0]), X])
    return np.quantile(Xt @ np.vstack([b, W]), qs, axis=1)


def _dyadic(A: np.ndarray) -> np.ndarray:
    """Multiples of 1/8: the products are exact whatever order BLAS sums them in."""
    return np.round(np.clip(A, -1e6, 1e6) * 8) / 8


def test_whitened_rows_give_the_centred_values_against_whitened_draws() -> None:
    rng = np.random.default_rng(0)
    Wt = rng.normal(size=(4, 500)) * [[1.0], [5.0], [0.1], [2.0]]
    Wt[2] += Wt[1]  # correlated coordinates
    Xt = np.column_stack([np.ones(7), rng.normal(size=(7, 3))])
    centre, M2 = Wt.mean(axis=1), np.cov(Wt, bias=True)
    lam, V = np.linalg.eigh(M2)
    S = (V / np.sqrt(lam)).T @ (Wt - centre[:, None])
    U = draw_order.whitened_rows(Xt, M2)
    np.testing.assert_allclose(U @ S, Xt @ (Wt - centre[:, None]), rtol=1e-9, atol=1e-9)


def test_opposite_rows_share_a_group_and_distinct_axes_do_not() -> None:
    M2 = np.diag([0.0, 1.0, 1.0])  # no intercept variance: u is the features' part of (1, x)
    X = np.array([[0.0, 3.0], [0.0, -2.0], [4.0, 0.0], [-1.0, 0.0], [0.0, 0.0]])
    _, labels = draw_order.group_rows(X, M2, 2)
    assert labels[0] == labels[1] != labels[2] == labels[3]


def test_farthest_axes_stop_when_every_row_is_on_a_chosen_axis() -> None:
    U = draw_order.unit_rows(np.array([[1.0, 0.0], [-2.0, 0.0], [0.0, 1.0], [0.0, 5.0]]))
    assert sorted(draw_order.farthest_axes(U, 10).tolist()) in ([0, 2], [0, 3], [1, 2], [1, 3])


def _runs(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> int:
    """Changes of value along the rows of the tail mask (values ≤ lo or ≥ hi)."""
    mask = np.less_equal(values, lo[:, None]) | np.greater_equal(values, hi[:, None])
    return int(np.count_nonzero(mask[:, 1:] != mask[:, :-1]))


def test_group_order_puts_the_tails_in_long_runs() -> None:
    """The point of the order: the rows' tail masks change value far less often."""
    rng = np.random.default_rng(1)
    Wt = np.vstack([rng.normal(size=4000), rng.normal(size=(3, 4000)) * [[1.0], [3.0], [0.5]]])
    X = rng.normal(size=(400, 3))
    centres, labels = draw_order.group_rows(X, draw_moments(Wt)[1], 16)
    Xt = np.column_stack([np.ones(400), X])
    F = Xt @ Wt
    lo, hi = np.quantile(F, [0.03, 0.97], axis=1)
    plain = _runs(F, lo, hi)
    grouped = 0
    for g in range(centres.shape[0]):
        Fg = Xt[labels == g] @ Wt[:, draw_order.draw_order(centres[g], Wt)]
        grouped += _runs(Fg, lo[labels == g], hi[labels == g])
    assert grouped < plain / 2


@pytest.mark.parametrize("threads", [1, 3])
def test_many_groups_give_numpys_quantiles(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    monkeypatch.setattr(draw_order, "ROWS_PER_GROUP", 1)
    rng = np.random.default_rng(2)
    X = _dyadic(rng.normal(size=(500, 3)) * 8)
    X[:3] = 0.0
    W, b = _dyadic(rng.standard_t(4, size=(3, 3000)) * 8), _dyadic(rng.normal(size=3000) * 8)
    assert draw_order.n_groups_for(500, 4) == 64
    got = projection_quantiles(X, W, b, (0.025, 0.975), 3000 * 10 * 4 * threads, threads)
    np.testing.assert_array_equal(got, _reference(X, W, b, (0.025, 0.975)))


def test_segments_cover_each_row_once_within_one_group() -> None:
    labels = np.random.default_rng(3).integers(0, 5, 1000)
    parts = draw_quantiles._segments(labels, 16, 3)
    seen = np.concatenate([rows for part in parts for _, rows in part])
    np.testing.assert_array_equal(np.sort(seen), np.arange(1000))
    assert all((labels[rows] == g).all() for part in parts for g, rows in part)
    assert all(abs(sum(r.size for _, r in part) - 333) <= 16 * 4 for part in parts)


def test_rows_of_norm_zero_are_never_centres() -> None:
    U = draw_order.unit_rows(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]))
    assert sorted(draw_order.farthest_axes(U, 4).tolist()) == [1, 3]


def test_identical_draws_and_no_rows() -> None:
    W, b = np.full((2, 50), 1.5), np.full(50, -0.5)
    X = np.random.default_rng(4).normal(size=(30, 2))
    got = projection_quantiles(X, W, b, (0.025, 0.975))
    np.testing.assert_allclose(got, _reference(X, W, b, (0.025, 0.975)), rtol=1e-15)
    assert projection_quantiles(X[:0], W, b, (0.1, 0.9)).shape == (2, 0)


def test_few_rows_or_wide_intervals_keep_the_draws_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """One group needs no sort of the draws (a one-row interval stays cheap)."""

    def no_sort(*args: object) -> None:
        raise AssertionError("draws sorted for a single group")

    monkeypatch.setattr(draw_quantiles, "draw_order", no_sort)
    rng = np.random.default_rng(5)
    W, b = _dyadic(rng.normal(size=(3, 2000)) * 8), _dyadic(rng.normal(size=2000) * 8)
    for X, qs in [(_dyadic(rng.normal(size=(3, 3)) * 8), (0.025, 0.975)),
                  (_dyadic(rng.normal(size=(900, 3)) * 8), (0.3, 0.7))]:  # fmt: skip
        got = projection_quantiles(X, W, b, qs, max_bytes=2000 * 10 * 4)
        np.testing.assert_array_equal(got, _reference(X, W, b, qs))
