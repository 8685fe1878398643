"""Kept Dask partitions whose shapes are known: no pass waits for the reading."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import pytest

from bsvm_core.partitions import ArrayPartitions

distributed = pytest.importorskip("distributed")
from bsvm_core.dask_partitions import DaskPartitions  # noqa: E402

READ = threading.Event()


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _held(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A partition that is read only once ``READ`` is set."""
    assert READ.wait(30)
    return X, y


def _broken() -> tuple[np.ndarray, np.ndarray]:
    raise ValueError("part-3.parquet: column 'f1' has empty values")


def _sums(X: np.ndarray, y: np.ndarray, p: int) -> tuple[int, np.ndarray]:
    return X.shape[0], X.sum(axis=0)


def test_known_shapes_open_before_the_partitions_are_read(client: Any) -> None:
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(1000, 3)), rng.integers(0, 2, 1000)
    blocks = ArrayPartitions.split(X, y, 4).blocks
    READ.clear()
    loaders = [partial(_held, Xb, yb) for Xb, yb in blocks]
    shapes = [(len(Xb), 3) for Xb, _ in blocks]
    parts = DaskPartitions.from_loaders(client, loaders, shapes=shapes)  # returns unread
    try:
        assert (parts.n_rows, parts.n_features, parts.passes) == (1000, 3, 0)
        READ.set()
        n, total = parts.map_sum(_sums)
        assert n == 1000 and parts.passes == 1
        np.testing.assert_allclose(total, X.sum(axis=0), rtol=1e-12)
    finally:
        READ.set()
        parts.close()


def test_a_reading_error_surfaces_in_the_first_pass(client: Any) -> None:
    parts = DaskPartitions.from_loaders(client, [_broken], shapes=[(10, 2)])
    try:
        with pytest.raises(ValueError, match=r"part-3\.parquet"):
            parts.map_gather(_sums)
    finally:
        parts.close()
