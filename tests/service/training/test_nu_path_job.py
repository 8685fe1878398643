"""``nu_path_job.store_path``: what a stored model's record holds when its path cannot be made."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sklearn.datasets import load_breast_cancer

from bsvm_core import BayesianSVM
from service.model_types import model_types
from service.plots.data import later_keys
from service.settings import Settings
from service.training import nu_path_job
from service.training.tasks import TrainTask
from service.training.worker import Outcome


class Registry:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail

    def set_plot_data(self, model_id: str, values: dict[str, Any]) -> None:
        if self.fail:
            raise OSError("disk full")
        self.calls.append((model_id, values))


class Store:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry


class Jobs:
    def __init__(self, ended: tuple[str, str | None] | None) -> None:
        self.ended = ended

    def ended_with(self, job_id: str) -> tuple[str, str | None] | None:
        return self.ended


@pytest.fixture(scope="module")
def em_task() -> tuple[TrainTask, BayesianSVM]:
    X, y = load_breast_cancer(return_X_y=True)
    X, y = X[::4, :5], y[::4]
    spec = model_types()["em_svm"]
    task = TrainTask(spec=spec, params={}, X=X, y=y, meta={"name": "em"})
    return task, BayesianSVM(method="em").fit(X, y)


def store_path(task: TrainTask, estimator: Any, registry: Registry, jobs: Jobs) -> None:
    nu_path_job.store_path(
        "j_1", task, estimator, Settings(), Store(registry), jobs, threading.Event()
    )  # type: ignore[arg-type]


def test_a_worker_that_cannot_start_leaves_an_error_entry_not_pending(
    em_task: tuple[TrainTask, BayesianSVM], monkeypatch: pytest.MonkeyPatch
) -> None:
    task, estimator = em_task

    def no_worker(*args: object, **kwargs: object) -> Outcome:
        raise RuntimeError("the forkserver is gone")

    monkeypatch.setattr(nu_path_job, "run_in_process", no_worker)
    registry = Registry()
    store_path(task, estimator, registry, Jobs(("succeeded", "m_1")))
    [(model_id, values)] = registry.calls
    assert model_id == "m_1"
    assert set(values) == set(later_keys(task.spec, estimator)) and values
    for entry in values.values():
        assert "pending" not in entry
        assert entry["error"] == (
            "the path could not be stored (RuntimeError: the forkserver is gone)"
        )


def test_a_failed_path_run_is_recorded_with_its_status(
    em_task: tuple[TrainTask, BayesianSVM], monkeypatch: pytest.MonkeyPatch
) -> None:
    task, estimator = em_task
    monkeypatch.setattr(
        nu_path_job, "run_in_process", lambda *a, **k: Outcome("timeout", message="after 1 s")
    )
    registry = Registry()
    store_path(task, estimator, registry, Jobs(("succeeded", "m_2")))
    [(model_id, values)] = registry.calls
    assert model_id == "m_2"
    assert {v["error"] for v in values.values()} == {
        "the path was not computed (timeout: after 1 s)"
    }


@pytest.mark.parametrize("ended", [None, ("failed", None), ("succeeded", None)])
def test_nothing_is_written_for_a_job_without_a_stored_model(
    em_task: tuple[TrainTask, BayesianSVM], ended: tuple[str, str | None] | None
) -> None:
    task, estimator = em_task
    registry = Registry()
    store_path(task, estimator, registry, Jobs(ended))
    assert registry.calls == []


def test_a_failing_registry_never_raises(
    em_task: tuple[TrainTask, BayesianSVM], monkeypatch: pytest.MonkeyPatch
) -> None:
    task, estimator = em_task
    monkeypatch.setattr(
        nu_path_job, "run_in_process", lambda *a, **k: Outcome("failed", message="x")
    )
    store_path(task, estimator, Registry(fail=True), Jobs(("succeeded", "m_3")))


def test_by_reference_the_path_is_said_to_be_missing(
    em_task: tuple[TrainTask, BayesianSVM],
) -> None:
    task, estimator = em_task
    by_reference = TrainTask(spec=task.spec, params={}, X=None, y=None, data={"features": []})
    registry = Registry()
    store_path(by_reference, estimator, registry, Jobs(("succeeded", "m_4")))
    assert registry.calls == [("m_4", {"path": {"error": nu_path_job.NO_PATH_BY_REFERENCE}})]
