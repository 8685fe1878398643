"""A slow test-double estimator, in a module light enough for a training worker to import fast.

It sleeps in small steps, reports progress, writes its pid, and can fail on request. Tests hand it
to the ``JobManager`` through ``SLOW_SPEC``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field
from sklearn.base import BaseEstimator, ClassifierMixin

from service.model_types import ModelSpec
from service.schemas.params import Params
from service.training.tasks import TrainTask


class SlowParams(Params):
    seconds: float = Field(0.0, ge=0)
    pid_file: str | None = None
    fail: bool = False
    allocate_mb: float = Field(0.0, ge=0)


class SlowEstimator(ClassifierMixin, BaseEstimator):
    """Predicts the majority class after sleeping ``seconds``; a test double for long fits."""

    def __init__(
        self,
        seconds: float = 0.0,
        pid_file: str | None = None,
        fail: bool = False,
        allocate_mb: float = 0.0,
    ) -> None:
        self.seconds = seconds
        self.pid_file = pid_file
        self.fail = fail
        self.allocate_mb = allocate_mb

    def set_progress_callback(self, fn: Callable[[float], None] | None) -> SlowEstimator:
        """Register ``fn(fraction_done)`` for the next ``fit``, as ``BayesianSVM`` does."""
        self._progress_callback = fn
        return self

    def fit(self, X: Any, y: Any) -> SlowEstimator:
        if self.pid_file:
            Path(self.pid_file).write_text(str(os.getpid()))
        if self.fail:
            raise ValueError("SlowEstimator was asked to fail")
        if self.allocate_mb:
            np.ones(int(self.allocate_mb * 2**20) // 8)  # touched, so really allocated
        steps = max(int(self.seconds / 0.05), 1)
        for step in range(steps):
            time.sleep(self.seconds / steps)
            callback = getattr(self, "_progress_callback", None)
            if callback is not None:
                callback((step + 1) / steps)
        self.classes_, counts = np.unique(y, return_counts=True)
        self.majority_ = self.classes_[np.argmax(counts)]
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict(self, X: Any) -> np.ndarray:
        return np.full(np.asarray(X).shape[0], self.majority_)


SLOW_SPEC = ModelSpec("slow", SlowEstimator, SlowParams)


def slow_task(name: str = "slow", memory_limit_mb: float | None = None, **params: Any) -> TrainTask:
    """A ``TrainTask`` for ``SlowEstimator`` on a tiny data set."""
    X = np.arange(12, dtype=float).reshape(6, 2)
    y = np.array([0, 0, 0, 1, 1, 1])
    meta = {"name": name, "feature_names": None, "random_state": None, "evaluation": None}
    return TrainTask(
        spec=SLOW_SPEC,
        params=SlowParams(**params).model_dump(),
        X=X,
        y=y,
        meta=meta,
        memory_limit_mb=memory_limit_mb,
    )
