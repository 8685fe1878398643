"""Column moments merged over partitions against the in-memory standardisation."""

from __future__ import annotations

import numpy as np
import pytest

from bsvm_core.bayesian_svm import standardise
from bsvm_core.partition_moments import column_moments
from bsvm_core.partitions import ArrayPartitions


@pytest.mark.parametrize("centre", [True, False])
def test_moments_by_partitions_match_standardise(centre: bool) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 4)) * [1e-3, 1.0, 1e5, 1e300] + [1e3, -3.0, 0.0, 1e300]
    X[:, 1] = 2.5  # a constant column keeps scale 1 (times its power)
    y = np.where(rng.random(1000) < 0.3, "x", "z")
    blocks = [(X[:0], y[:0]), (X[:1], y[:1]), (X[1:400], y[1:400]), (X[400:], y[400:])]
    moments = column_moments(ArrayPartitions(blocks))
    mean, scale, _ = standardise(X, centre)
    m, s = moments.standardisation(centre)
    np.testing.assert_allclose(m * moments.power, mean, rtol=1e-12)
    np.testing.assert_allclose(s * moments.power, scale, rtol=1e-8)  # column 0: mean/sd = 1e6
    assert moments.n == 1000 and moments.finite and list(moments.classes) == ["x", "z"]
