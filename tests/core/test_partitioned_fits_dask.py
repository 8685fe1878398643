"""fit_partitions on partitions held by Dask workers: the same models as in memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import make_classification

from bsvm_core.bayesian_svm import BayesianSVM
from bsvm_core.lda import LDA
from bsvm_core.linear_svm import LinearSVM
from bsvm_core.partitions import ArrayPartitions
from bsvm_core.qda import QDA
from bsvm_core.solvers import linear_partitioned

distributed = pytest.importorskip("distributed")
from bsvm_core.dask_partitions import DaskPartitions  # noqa: E402


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=2400,
        n_features=5,
        n_informative=4,
        n_redundant=0,
        n_classes=3,
        n_clusters_per_class=1,
        flip_y=0.05,
        random_state=2,
    )
    return X + 1.0, np.array(["x", "y", "z"])[y]


def _blocks(X: np.ndarray, y: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    return ArrayPartitions.split(X, y, 5).blocks


@pytest.mark.parametrize("n_classes", [2, 3])
def test_linear_svm_on_dask_workers_is_the_in_memory_optimum(
    client: Any, data: tuple[np.ndarray, np.ndarray], monkeypatch, n_classes: int
) -> None:
    monkeypatch.setattr(linear_partitioned, "SAMPLE_ROWS", 500)  # the driver's constants
    monkeypatch.setattr(linear_partitioned, "BAND_ROWS", 300)
    X, y = data
    if n_classes == 2:
        X, y = X[y != "z"], y[y != "z"]
    with DaskPartitions.from_arrays(client, _blocks(X, y)) as parts:
        ours = LinearSVM(C=1.0).fit_partitions(parts)
        assert ours.n_passes_ == parts.passes and ours.n_passes_ <= 10
    ref = LinearSVM(C=1.0).fit(X, y)
    assert ours.converged_.all()
    np.testing.assert_allclose(ours.objective_, ref.objective_, rtol=1e-8)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=0, atol=1e-6)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=0, atol=1e-6)


def test_lda_and_qda_on_dask_workers_in_one_pass(
    client: Any, data: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = data
    with DaskPartitions.from_arrays(client, _blocks(X, y)) as parts:
        lda = LDA().fit_partitions(parts)
        qda = QDA(reg_param=0.1).fit_partitions(parts)
        assert parts.passes == 2
    ref_lda, ref_qda = LDA().fit(X, y), QDA(reg_param=0.1).fit(X, y)
    np.testing.assert_allclose(lda.covariance_, ref_lda.covariance_, rtol=1e-10)
    np.testing.assert_allclose(lda.coef_, ref_lda.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(qda.covariances_, ref_qda.covariances_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(qda.predict_proba(X), ref_qda.predict_proba(X), atol=1e-10)


@pytest.mark.parametrize("multiclass", ["ovr", "ovo"])
def test_em_on_dask_workers_is_the_in_memory_mode(
    client: Any, data: tuple[np.ndarray, np.ndarray], multiclass: str
) -> None:
    """The design (one-vs-one: each pair's labels) travels to the workers with every pass."""
    X, y = data
    kw = {"method": "em", "alpha": 1.0, "nu": 0.7, "multiclass": multiclass}
    with DaskPartitions.from_arrays(client, _blocks(X, y)) as parts:
        ours = BayesianSVM(**kw).fit_partitions(parts)
        assert ours.n_passes_ == parts.passes
    ref = BayesianSVM(**kw).fit(X, y)
    assert ours.binary_problems_ == ref.binary_problems_ and len(ours.binary_problems_) == 3
    np.testing.assert_allclose(ours.objective_, ref.objective_, rtol=1e-8)
    np.testing.assert_allclose(ours.beta_std_, ref.beta_std_, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
