"""Order statistics of ragged rows from a sorted band: against a full sort of each row."""

from __future__ import annotations

import numpy as np
import pytest

from bsvm_core import band_selection


def _ragged(rng: np.random.Generator, n_rows: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Rows of 8·k values (k 1 to 40) with ties and point masses, and the rows end to end."""
    rows = []
    for i in range(n_rows):
        width = 8 * int(rng.integers(1, 41))
        row = np.round(rng.normal(size=width) * 16) / 16  # many ties
        if i % 7 == 0:
            row[: width // 2] = 0.5  # a point mass
        rows.append(row)
    return rows, np.concatenate(rows)


@pytest.mark.parametrize("side", [1, -1])
@pytest.mark.parametrize("ulps", [-1, 0, 1])
def test_band_select_is_exact_where_it_says_so(side: int, ulps: int) -> None:
    """Limits on (or an ulp from) the rows' own values: each row done exactly when its counts say
    so, with the values of a full sort."""
    rng = np.random.default_rng([side + 1, ulps + 1])
    rows, flat = _ragged(rng, 300)
    widths = np.array([r.size for r in rows])
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]])
    depths = [3, 4]
    near, far = np.empty(len(rows)), np.empty(len(rows))
    for i, r in enumerate(rows):
        ordered = np.sort(side * r)
        a, b = rng.integers(0, r.size, 2)
        near[i], far[i] = side * ordered[min(a, b)], side * ordered[max(a, b)]
    for _ in range(abs(ulps)):
        near = np.nextafter(near, np.sign(ulps) * side * np.inf)
        far = np.nextafter(far, np.sign(ulps) * side * np.inf)
    scratch = np.empty(2 * flat.size, dtype=bool)
    got, done, counted_, reached_ = band_selection.band_select(
        flat, starts, widths, near, far, depths, side, scratch
    )
    for i, r in enumerate(rows):
        counted = np.count_nonzero(side * r <= side * near[i])
        reached = np.count_nonzero(side * r <= side * far[i])
        assert done[i] == (counted <= min(depths) and reached > max(depths) < r.size)
        assert counted_[i] == counted and reached_[i] == reached
        if done[i]:
            expected = side * np.sort(side * r)[depths]
            np.testing.assert_array_equal(got[i], expected)
    assert done.any() and not done.all()


def test_row_counts_and_sparse_nonzero_match_numpy() -> None:
    rng = np.random.default_rng(3)
    rows, flat = _ragged(rng, 200)
    widths = np.array([r.size for r in rows])
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]])
    for density in [0.0, 0.01, 0.3, 1.0]:
        mask = rng.random(flat.size) < density
        expected = [np.count_nonzero(mask[a : a + w]) for a, w in zip(starts, widths, strict=True)]
        np.testing.assert_array_equal(band_selection.row_counts(mask, starts), expected)
        np.testing.assert_array_equal(band_selection.sparse_nonzero(mask), np.flatnonzero(mask))
        packed, counts = band_selection.gather_rows(flat, mask, starts, np.inf)
        np.testing.assert_array_equal(counts, expected)
        for i, (a, w) in enumerate(zip(starts, widths, strict=True)):
            picked = flat[a : a + w][mask[a : a + w]]
            np.testing.assert_array_equal(packed[i, : picked.size], picked)
            assert np.all(packed[i, picked.size :] == np.inf)


@pytest.mark.parametrize("side", [1, -1])
def test_band_select_by_blocks_equals_by_rows(side: int) -> None:
    """Blocks of rows of one width compare in place: the same statistics, counts and rows done
    as with each row's limits repeated to its values."""
    rng = np.random.default_rng(side + 5)
    sizes, block_widths = np.array([3, 1, 7, 2]), np.array([16, 48, 8, 32])
    widths = np.repeat(block_widths, sizes)
    flat = np.round(rng.normal(size=int(widths.sum())) * 8) / 8
    starts = np.concatenate([[0], np.cumsum(widths)[:-1]])
    near = rng.normal(size=widths.size) - side * 1.0
    far = near + side * rng.random(widths.size) * 2
    scratch = np.empty(2 * flat.size, dtype=bool)
    by_rows = band_selection.band_select(flat, starts, widths, near, far, [1, 2], side, scratch)
    by_blocks = band_selection.band_select(
        flat, starts, widths, near, far, [1, 2], side, scratch, (sizes, block_widths)
    )
    for a, b in zip(by_rows, by_blocks, strict=True):
        np.testing.assert_array_equal(a, b)
    assert by_rows[1].any()
