"""The binary problems run one after another in-process unless joblib is asked for more (by
``n_jobs`` or a ``joblib.parallel_config``), with the same models either way."""

from __future__ import annotations

from typing import Any

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.preprocessing import StandardScaler

import bsvm_core._svm_base as svm_base
from bsvm_core import KernelSVM, LinearSVM


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    real = svm_base.Parallel

    def parallel(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs.get("n_jobs"))
        return real(*args, **kwargs)

    monkeypatch.setattr(svm_base, "Parallel", parallel)
    return calls


@pytest.mark.parametrize("make", [KernelSVM, LinearSVM])
def test_jobs_go_through_joblib_only_when_asked(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    calls = _spy(monkeypatch)
    alone = make(probability=True, random_state=0).fit(X, y)
    assert calls == []
    make(n_jobs=1, random_state=0).fit(X, y)
    assert calls == []
    two = make(n_jobs=2, probability=True, random_state=0).fit(X, y)
    assert calls == [2]
    with joblib.parallel_config(backend="threading", n_jobs=2):
        configured = make(probability=True, random_state=0).fit(X, y)
    assert calls == [2, None]  # Parallel(n_jobs=None) takes the context's 2
    for other in (two, configured):
        np.testing.assert_allclose(other.decision_function(X), alone.decision_function(X))
        np.testing.assert_allclose(other.predict_proba(X), alone.predict_proba(X))
