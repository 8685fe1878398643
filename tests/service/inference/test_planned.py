"""``service.inference.planned``: labels from a model's plan are the pipeline's own (rows built on
a label boundary included), decision values equal to rounding, for any chain of
``StandardScaler`` steps in front, for every planned model type, kernel and multiclass scheme."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from bsvm_core import QDA, KernelSVM
from service.inference import planned
from service.inference.planned import plan_of, planned_scorers
from service.inference.scoring import scorer
from tests.core.test_row_plans import MODELS, data, near_boundaries, term_scale


def scorers_of(pipe) -> dict:
    base = {"label": scorer(pipe, "predict"), "decision": scorer(pipe, "decision_function")}
    return planned_scorers(pipe, base)


def cancer() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    return X, y


STEPS = {
    "both": [StandardScaler()],
    "no-mean": [StandardScaler(with_mean=False)],
    "no-std": [StandardScaler(with_std=False)],
    "chain": [StandardScaler(with_std=False), StandardScaler(with_mean=False), StandardScaler()],
    "none": [],
}


@pytest.mark.parametrize("steps", list(STEPS), ids=list(STEPS))
def test_plan_labels_are_the_pipelines_and_decisions_equal_to_rounding(steps):
    X, y = cancer()
    named = [(f"s{i}", step) for i, step in enumerate(STEPS[steps])]
    if steps == "none":  # a bare model, on rows scaled beforehand
        X = StandardScaler().fit_transform(X)
    pipe = Pipeline([*named, ("model", KernelSVM())]) if named else KernelSVM()
    pipe.fit(X[::2], y[::2])
    assert plan_of(pipe) is not None
    fns = scorers_of(pipe)
    rows = X[1::2]
    expected_f = pipe.decision_function(rows)
    scale = np.abs(expected_f).max() + 1.0
    for n in (1, 2, 7):
        for start in range(0, 60, n):
            block = rows[start : start + n]
            np.testing.assert_array_equal(fns["label"](block), pipe.predict(block), strict=True)
            np.testing.assert_allclose(
                fns["decision"](block), expected_f[start : start + n], rtol=0, atol=1e-12 * scale
            )
    np.testing.assert_array_equal(fns["label"](rows), pipe.predict(rows), strict=True)


def test_blocks_past_the_plans_size_go_to_the_estimator(monkeypatch):
    X, y = cancer()
    pipe = Pipeline([("s", StandardScaler()), ("model", KernelSVM())]).fit(X[::2], y[::2])
    monkeypatch.setattr(planned, "PLAN_MAX_ENTRIES", 1)
    fns = scorers_of(pipe)
    rows = X[1::2]
    np.testing.assert_array_equal(fns["label"](rows), pipe.predict(rows), strict=True)
    np.testing.assert_array_equal(fns["decision"](rows), pipe.decision_function(rows), strict=True)


def test_a_row_near_a_tie_gets_the_estimators_label(monkeypatch):
    X, y = cancer()
    pipe = Pipeline([("s", StandardScaler()), ("model", KernelSVM())]).fit(X, y)
    plan, classes, max_rows = plan_of(pipe)
    wide = replace(plan.rows, tie=np.array([1e9]), tie32=np.array([1e9]))
    monkeypatch.setattr(
        planned, "plan_of", lambda _: (replace(plan, rows=wide), classes, max_rows)
    )  # every value "near a tie"
    calls = []
    labels = scorer(pipe, "predict")

    def counted(rows):
        calls.append(rows.shape[0])
        return labels(rows)

    fns = planned_scorers(pipe, {"label": counted})
    for rows in (X[:1], X[:3], X[100:101]):
        np.testing.assert_array_equal(fns["label"](rows), pipe.predict(rows), strict=True)
    assert calls == [1, 3, 1]  # every row again, by the estimator


def test_other_models_keep_their_scorers():
    X, y = load_iris(return_X_y=True)
    base = {"label": lambda rows: rows}
    for model in (
        Pipeline([("s", MinMaxScaler()), ("m", KernelSVM())]).fit(X[y < 2], y[y < 2]),
        Pipeline([("s", StandardScaler()), ("m", QDA())]).fit(X, y),
        KernelSVM(kernel=lambda A, B: A @ B.T).fit(X[y < 2], y[y < 2]),
    ):
        assert plan_of(model) is None
        assert planned_scorers(model, base) is base


@pytest.mark.parametrize("steps", ["both", "chain"])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("name", list(MODELS))
def test_every_planned_model_gives_the_pipelines_labels_near_ties_too(name, n_classes, steps):
    X, y, _ = data(n_classes, 3)
    named = [(f"s{i}", step) for i, step in enumerate(STEPS[steps])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe = Pipeline([*named, ("model", MODELS[name]())]).fit(X, y)
    found = plan_of(pipe)
    assert found is not None
    fns = scorers_of(pipe)
    truth = pipe.predict(X)
    near = near_boundaries(found[0], X, np.searchsorted(pipe.classes_, truth))
    rows = np.vstack([X, near])
    expected = pipe.decision_function(rows)
    Z = rows
    for _, step in named:
        Z = step.transform(Z)
    tol = 1e-12 * term_scale(pipe.steps[-1][1], Z)
    tol = tol if expected.ndim == 2 else tol[:, 0]
    for n in (1, 3, rows.shape[0]):
        for start in range(0, rows.shape[0], n):
            block = slice(start, start + n)
            np.testing.assert_array_equal(
                fns["label"](rows[block]), pipe.predict(rows[block]), strict=True
            )
            got = fns["decision"](rows[block])
            # the estimator's own answer for this block (a pairwise value within rounding of 0
            # may take another vote in a block of another shape)
            own = pipe.decision_function(rows[block])
            assert got.shape == own.shape
            assert np.all(np.abs(got - own) <= tol[block])
            assert np.all(np.abs(got - expected[block]) <= tol[block] + 1.0)
