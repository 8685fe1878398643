"""What a pass of the partitioned linear SVM computes on one block equals its row-by-row formula."""

from __future__ import annotations

import numpy as np
import pytest

from bsvm_core.solvers.linear_partition_passes import (
    T_GRID,
    T_SUMS,
    encode_labels,
    huber_hinge,
    newton_block,
    newton_sums,
    pieces,
    problem_rows,
)


def _row_by_row(X, y, classes, problems, states):  # type: ignore[no-untyped-def]
    """``newton_block`` as the formulas read: every row at every t."""
    y_idx = encode_labels(y, classes)
    out = []
    for j, w, b, dw, db, mu in states:
        Xj, yj = problem_rows(X, y_idx, problems[j])
        z0 = 1.0 - yj * (Xj @ w + b)
        dm = yj * (Xj @ dw + db)
        h = huber_hinge(z0[:, None] - dm[:, None] * T_GRID[None, :], mu).sum(axis=0)
        changed = int(np.count_nonzero(pieces(z0, mu) != pieces(z0 - dm, mu)))
        sums = [newton_sums(Xj, yj, z0 - t * dm, mu) for t in T_SUMS]
        out.append((h, changed, sums, newton_sums(Xj, yj, z0 - dm, 0.1 * mu)))
    return out


@pytest.mark.parametrize("mu", [10.0, 1.0, 0.1, 1e-3, 1e-6])
@pytest.mark.parametrize("step", [0.0, 0.02, 0.5])
def test_newton_block_equals_every_row_at_every_step(mu: float, step: float) -> None:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(5000, 6))
    score = X @ [1.0, -1.0, 0.5, 0.0, 0.0, 2.0] + rng.normal(size=5000)
    labels = np.array([3, 5, 9])[np.digitize(score, [-0.5, 0.5])]
    classes, problems = np.array([3, 5, 9]), [(0, -1), (2, -1), (0, 2)]
    w = np.array([1.5, -1.2, 0.4, 0.1, 0.0, 2.2])
    states = [(j, (-1) ** j * w, 0.2, step * rng.normal(size=6), step * 0.3, mu) for j in range(3)]
    ours = newton_block(X, labels, 0, classes, problems, states)
    ref = _row_by_row(X, labels, classes, problems, states)
    for a, b in zip(ours, ref, strict=True):
        np.testing.assert_allclose(a[0], b[0], rtol=1e-12, atol=1e-9)
        assert a[1] == b[1]
        for got, want in zip([*a[2], a[3]], [*b[2], b[3]], strict=True):
            np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-9)
            np.testing.assert_array_equal(got[2], want[2])
