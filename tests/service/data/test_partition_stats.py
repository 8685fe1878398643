"""The column statistics of a training by reference, from its blocks, equal those of the rows."""

from __future__ import annotations

import numpy as np
import pytest

from bsvm_core.partitions import ArrayPartitions
from service.data.partitions import block_stats, combine_stats
from service.plots.data import feature_stats


def test_block_statistics_combine_to_the_rows_statistics() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1000, 4)) * [1.0, 10.0, 0.1, 3.0] + [0.0, -5.0, 2.0, 1.0]
    parts = ArrayPartitions.split(X, np.zeros(1000), 7)
    got = combine_stats([block_stats(block) for block, _ in parts], parts.n_rows)
    want = feature_stats(X)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-12, abs=1e-12)
