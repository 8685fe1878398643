"""Executors: the same fit locally and on a real dask cluster; progress, cancel, timeout, chains."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import distributed
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from service.model_types import model_types
from service.settings import Settings
from service.training.executors import DaskExecutor, LocalExecutor, make_executor
from service.training.tasks import TrainTask
from service.training.worker import Outcome
from tests.service.slow_estimator import slow_task
from tests.service.training.test_jobs import process_gone, read_pid

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(dask_cluster: Any) -> Any:
    return dask_cluster


@pytest.fixture(scope="module")
def executor(cluster: Any) -> Iterator[DaskExecutor]:
    dask_executor = DaskExecutor(cluster.scheduler_address)
    dask_executor.warm_up()
    yield dask_executor
    dask_executor.close()


def run(
    executor: Any,
    task: TrainTask,
    timeout_s: float = 120.0,
    cancelled: threading.Event | None = None,
    on_progress: Any = lambda f: None,
) -> Outcome:
    cancelled = cancelled or threading.Event()
    return executor.run(task, timeout_s=timeout_s, cancelled=cancelled, on_progress=on_progress)


def remote_and_local(cluster: Any, executor: DaskExecutor, task: TrainTask) -> tuple[Any, ...]:
    """``task`` run on the cluster (watching its task stream) and locally; both succeeded.

    Returns (remote outcome, local outcome, the keys of the tasks the cluster ran).
    """
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as observer:
        with distributed.get_task_stream(client=observer) as stream:
            remote = run(executor, task)
        keys = [str(item["key"]) for item in stream.data]
    local = run(LocalExecutor(), task)
    assert remote.status == local.status == "succeeded", remote.message
    return remote, local, keys


def task_of(model_type: str, params: dict[str, Any], X: np.ndarray, y: np.ndarray) -> TrainTask:
    meta = {"name": model_type, "feature_names": None, "random_state": None, "evaluation": None}
    spec = model_types()[model_type]
    return TrainTask(
        spec=spec, params=spec.params_model(**params).model_dump(), X=X, y=y, meta=meta
    )


@pytest.fixture(scope="module")
def cancer() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    return X[::3, :6], y[::3]


def test_make_executor_follows_the_setting():
    assert isinstance(make_executor(Settings()), LocalExecutor)
    dask_executor = make_executor(Settings(dask_scheduler="tcp://127.0.0.1:1"))
    assert isinstance(dask_executor, DaskExecutor)
    assert dask_executor.scheduler_address == "tcp://127.0.0.1:1"
    dask_executor.close()  # never connected: connecting is lazy


def test_an_unreachable_scheduler_fails_the_training():
    unreachable = DaskExecutor("tcp://127.0.0.1:9", connect_timeout_s=0.5)
    outcome = run(unreachable, slow_task())
    assert outcome.status == "failed" and "unreachable" in outcome.message
    unreachable.close()


def test_dask_fit_equals_the_local_fit(executor, cancer):
    X, y = cancer
    task = task_of("kernel_svm", {"C": 2.0, "probability": True, "random_state": 3}, X, y)
    remote, local = run(executor, task), run(LocalExecutor(), task)
    assert remote.status == local.status == "succeeded", remote.message
    a, b = remote.result.estimator, local.result.estimator
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), rtol=1e-12)
    assert remote.result.metrics == local.result.metrics


def test_progress_arrives_from_the_worker(executor):
    seen: list[float] = []
    outcome = run(executor, slow_task(seconds=1.5), on_progress=seen.append)
    assert outcome.status == "succeeded", outcome.message
    assert seen[0] == 0.1 and seen[-1] == 0.9 and seen == sorted(seen)
    assert any(0.15 < f < 0.85 for f in seen), seen  # the estimator's own hook, relayed


def test_cancel_kills_the_fit_on_the_worker(executor, tmp_path):
    pid_file = tmp_path / "pid"
    cancelled = threading.Event()
    outcome: list[Outcome] = []
    runner = threading.Thread(
        target=lambda: outcome.append(
            run(executor, slow_task(seconds=300.0, pid_file=str(pid_file)), cancelled=cancelled)
        )
    )
    runner.start()
    pid = read_pid(pid_file)
    cancelled.set()
    runner.join(timeout=60)
    assert not runner.is_alive() and outcome[0].status == "cancelled"
    assert process_gone(pid)  # killed, long before its 300 s sleep would end


def test_timeout_stops_waiting_and_kills_the_fit(executor, tmp_path):
    pid_file = tmp_path / "pid"
    outcome = run(executor, slow_task(seconds=300.0, pid_file=str(pid_file)), timeout_s=6.0)
    assert outcome.status == "timeout" and "6 s" in outcome.message
    assert process_gone(read_pid(pid_file))


def test_an_invalid_fit_is_invalid(executor):
    outcome = run(executor, slow_task(fail=True))
    assert outcome.status == "invalid" and "asked to fail" in outcome.message


def test_the_cluster_is_free_again_after_cancel_and_timeout(executor):
    # a stopped fit must not keep a worker thread (the outer task seceded, its process died)
    assert run(executor, slow_task()).status == "succeeded"


def test_mcmc_chains_run_as_cluster_tasks_and_match_the_local_draws(cluster, executor, cancer):
    X, y = cancer
    params = {"n_chains": 2, "n_draws": 40, "burn_in": 10, "random_state": 7}
    task = task_of("mcmc_svm", params, X, y)
    remote, local, keys = remote_and_local(cluster, executor, task)
    assert any(k.endswith("-fit") and k.startswith("bsvm-") for k in keys), keys
    chain_tasks = [k for k in keys if not k.startswith("bsvm-")]
    assert chain_tasks, keys  # the chains ran as tasks of their own, beside the outer one
    a, b = remote.result.estimator, local.result.estimator
    assert a.n_jobs == -1 and b.n_jobs == 1
    np.testing.assert_array_equal(a.coef_draws_, b.coef_draws_)
    np.testing.assert_array_equal(a.intercept_draws_, b.intercept_draws_)


def test_cv_and_search_folds_run_as_cluster_tasks_and_match_local(cluster, executor, cancer):
    X, y = cancer
    task = task_of("lda", {}, X, y)
    task.cv = {"k": 3, "random_state": 0}
    task.search = {"grid": {"tol": [1e-4, 1e-2]}, "candidates": [{"tol": 1e-4}, {"tol": 1e-2}],
                   "scoring": "f1", "k": 3, "random_state": 0}  # fmt: skip
    remote, local, keys = remote_and_local(cluster, executor, task)
    assert [k for k in keys if not k.startswith("bsvm-")], keys  # the folds ran as tasks
    assert remote.result.metrics["cv"] == local.result.metrics["cv"]
    assert remote.result.extras["search"] == local.result.extras["search"]
