"""Order statistics of ragged rows laid end to end, from the values in a narrow band of each row.

The screened quantiles compute, for each row, the values of the draws its block keeps: rows of
different blocks have different widths, so they are stored one after another in one flat array
(row i at ``starts[i] : starts[i] + widths[i]``, every width a multiple of 8). Each row comes with
two limits a < b around the order statistics it needs. Its values ≤ a are only counted (c), those
in (a, b] (the band, a few dozen) are gathered and sorted: the value at depth d (0: the
smallest) is the (d − c)-th of the sorted band whenever c ≤ d < c + #band. Every step is one numpy
call over all the rows at once, so a few dozen calls serve thousands of rows.
"""

from __future__ import annotations

import numpy as np


def row_counts(mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """True entries of the flat boolean ``mask`` in each row, the rows [starts[i], starts[i + 1])
    end to end up to the mask's end, every start a multiple of 8 and every row non-empty (the
    bytes are counted eight at a time)."""
    per_word = np.bitwise_count(mask.view(np.uint64))
    return np.add.reduceat(per_word, starts // 8, dtype=np.intp)


def sparse_nonzero(mask: np.ndarray) -> np.ndarray:
    """``np.flatnonzero`` of a flat boolean array of a multiple of 8 entries, faster when few are
    true: only the 8-byte words holding one are looked into."""
    words = mask.view(np.uint64)
    some = np.flatnonzero(words != 0)
    inside = np.flatnonzero(words[some].view(bool))
    return some[inside >> 3] * 8 + (inside & 7)


def gather_rows(
    values: np.ndarray, mask: np.ndarray, starts: np.ndarray, fill: float
) -> tuple[np.ndarray, np.ndarray]:
    """(packed, counts): each row's values where ``mask`` holds (few), to the left of a matrix as
    wide as the largest count (at least 1), the rest ``fill``; rows as in ``row_counts``."""
    flat = sparse_nonzero(mask)
    counts = np.diff(np.searchsorted(flat, np.append(starts, mask.size)))
    packed = np.full((counts.size, max(int(counts.max(initial=0)), 1)), fill)
    packed[np.arange(packed.shape[1]) < counts[:, None]] = values[flat]
    return packed, counts


def band_select(
    values: np.ndarray,
    starts: np.ndarray,
    widths: np.ndarray,
    near: np.ndarray,
    far: np.ndarray,
    depths: list[int],
    side: int,
    scratch: np.ndarray,
    blocks: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(statistics (rows, len(depths)), done, c, reached): each row's values at ``depths`` from
    its smallest (side 1; from its largest, side −1), exact where ``done``: c = #{side·v ≤
    side·near} ≤ min(depths) and reached = c + #band (#{side·v ≤ side·far} when near is not
    beyond far) > max(depths).

    ``values`` holds the rows end to end (``starts``, ``widths``: multiples of 8, not 0); a row
    must hold every value of its own with side·v ≤ side·far (entries that are no value hold
    side·∞). ``scratch`` is a boolean array of at least 2 · values.size entries. ``blocks``
    (rows, width) of consecutive rows of one width each, when known, lets each block compare
    against its rows' limits in place (no limit repeated to every value).
    """
    size = values.size
    beyond_far = scratch[:size]
    beyond_near = scratch[size : 2 * size]
    compare = np.less_equal if side == 1 else np.greater_equal
    if blocks is None:
        compare(values, np.repeat(far, widths), out=beyond_far)
        compare(values, np.repeat(near, widths), out=beyond_near)
    else:
        at, row = 0, 0
        for rows, width in zip(*(b.tolist() for b in blocks), strict=True):
            block = slice(at, at + rows * width)
            shape = (rows, width)
            V = values[block].reshape(shape)
            compare(V, far[row : row + rows, None], out=beyond_far[block].reshape(shape))
            compare(V, near[row : row + rows, None], out=beyond_near[block].reshape(shape))
            at, row = at + rows * width, row + rows
    counted = row_counts(beyond_near, starts)
    np.greater(beyond_far, beyond_near, out=beyond_far)  # the band: beyond far, not near
    band, in_band = gather_rows(values, beyond_far, starts, np.inf)
    band.sort(axis=1)  # the band's values from the left, +∞ after them
    reached = counted + in_band
    done = (counted <= min(depths)) & (reached > max(depths))
    at = np.subtract.outer(np.asarray(depths), counted).T  # depth within the band
    if side == -1:  # from the band's largest value
        at = in_band[:, None] - 1 - at
    np.clip(at, 0, band.shape[1] - 1, out=at)
    return np.take_along_axis(band, at, axis=1), done, counted, reached
