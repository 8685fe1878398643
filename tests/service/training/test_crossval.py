"""Cross-validation and grid search on POST /train, against scikit-learn on the same folds."""

from __future__ import annotations

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import f1_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from bsvm_core import LDA, LinearSVM
from service.model_types import model_types
from service.training.crossval import cross_validate, fold_indices, grid_search
from service.training.search_request import timeout_detail
from service.training.selection import run_model_selection
from service.training.tasks import TrainTask
from tests.service.conftest import train_body


@pytest.fixture(scope="module")
def cancer() -> tuple[np.ndarray, np.ndarray]:
    """120 rows, 4 features of breast cancer (binary, integer labels)."""
    X, y = load_breast_cancer(return_X_y=True)
    return X[:120, :4], y[:120]


def test_cv_metrics_equal_scikit_learn_on_the_same_folds(client, cancer):
    X, y = cancer
    body = train_body(X, y, "lda", evaluation={"cv": 5, "random_state": 3})
    r = client.post("/train", json=body)
    assert r.status_code == 201, r.text
    rec = r.json()
    cv = rec["metrics"]["cv"]
    assert cv["k"] == 5 and cv["random_state"] == 3 and len(cv["folds"]) == 5
    assert rec["metrics"]["heldout"] is None and rec["training"]["n_samples"] == len(y)
    folds = StratifiedKFold(5, shuffle=True, random_state=3)
    labels = np.asarray(list(map(str, y)))
    accuracy = cross_val_score(LDA(), X, labels, cv=folds, scoring="accuracy")
    got = np.array([f["accuracy"] for f in cv["folds"]])
    np.testing.assert_allclose(got, accuracy, rtol=0, atol=1e-12)
    assert cv["mean"]["accuracy"] == pytest.approx(accuracy.mean(), abs=1e-12)
    assert cv["sd"]["accuracy"] == pytest.approx(accuracy.std(), abs=1e-12)
    binary_f1 = [
        f1_score(labels[te], LDA().fit(X[tr], labels[tr]).predict(X[te]), pos_label="1")
        for tr, te in folds.split(X, labels)
    ]
    np.testing.assert_allclose([f["f1"] for f in cv["folds"]], binary_f1, atol=1e-12)
    assert cv["mean"]["roc_auc"] > 0.8 and cv["sd"]["roc_auc"] >= 0.0


def test_cv_on_the_training_split_with_test_fraction(client, cancer):
    X, y = cancer
    body = train_body(X, y, "lda", evaluation={"cv": 4, "test_fraction": 0.25, "random_state": 1})
    rec = client.post("/train", json=body).json()
    n_train = rec["training"]["n_samples"]
    assert n_train == 90 and rec["metrics"]["heldout"]["n_samples"] == 30
    assert sum(f["n_samples"] for f in rec["metrics"]["cv"]["folds"]) == n_train


def test_search_picks_the_best_c_of_a_grid_search_cv(client, cancer):
    X, y = cancer
    grid = [0.001, 0.01, 0.1, 1.0, 10.0]
    body = train_body(
        X, y, "linear_svm", search={"C": grid}, evaluation={"cv": 4, "random_state": 5}
    )
    r = client.post("/train", json=body)
    assert r.status_code == 201, r.text
    rec = r.json()
    folds = StratifiedKFold(4, shuffle=True, random_state=5)
    labels = np.asarray(list(map(str, y)))
    # linear_svm is standardised by default: the scaler is refitted inside every fold
    scaled = make_pipeline(StandardScaler(), LinearSVM(random_state=0))
    ref = GridSearchCV(scaled, {"linearsvm__C": grid}, cv=folds).fit(X, labels)
    search = rec["search"]
    assert search["scoring"] == "accuracy" and search["k"] == 4
    assert search["best_params"] == {"C": ref.best_params_["linearsvm__C"]}
    assert rec["params"]["C"] == ref.best_params_["linearsvm__C"]
    means = [row["mean"] for row in search["results"]]
    np.testing.assert_allclose(means, ref.cv_results_["mean_test_score"], atol=1e-12)
    np.testing.assert_allclose(
        [row["sd"] for row in search["results"]], ref.cv_results_["std_test_score"], atol=1e-12
    )
    assert [row["params"]["C"] for row in search["results"]] == grid
    assert rec["metrics"]["cv"]["mean"]["accuracy"] == pytest.approx(max(means), abs=1e-12)


def test_search_by_roc_auc_defaults_to_five_folds(client, cancer):
    X, y = cancer
    body = train_body(X, y, "kernel_svm", search={"C": [0.1, 1.0], "gamma": [0.01, 0.1]},
                      search_scoring="roc_auc", params={"random_state": 0})  # fmt: skip
    rec = client.post("/train", json=body).json()
    search = rec["search"]
    assert search["k"] == 5 and search["scoring"] == "roc_auc" and len(search["results"]) == 4
    best = max(search["results"], key=lambda row: row["mean"])
    assert search["best_params"] == best["params"]
    assert {k: rec["params"][k] for k in ("C", "gamma")} == best["params"]
    assert rec["metrics"].get("cv") is None


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"search": {"bogus": [1]}}, "search.bogus"),
        ({"search": {"C": [-1.0]}}, "search.C[0]"),
        ({"search": {"C": list(np.linspace(0.1, 2, 21))}}, "search.C"),
        ({"search": {"C": [1.0] * 15, "tol": [1e-3] * 15}}, "search"),
        ({"search": {"C": [1.0], "max_iter": [10**9]}}, "search.max_iter[0]"),
        ({"evaluation": {"cv": 80}}, "evaluation.cv"),
        ({"evaluation": {"cv": 1}}, "evaluation.cv"),
        ({"search": {"C": [1.0]}, "evaluation": {"cv": 19}}, "evaluation.cv"),
    ],
)
def test_bad_cv_and_search_are_422(client, cancer, extra, field):
    X, y = cancer
    small_y = y.copy()
    small_y[:] = 0
    small_y[:18] = 1  # 18 rows of class 1: fewer than 19 folds
    r = client.post("/train", json=train_body(X, small_y, "linear_svm", **extra))
    assert r.status_code == 422, r.text
    assert any(d["field"].startswith(field) for d in r.json()["details"]), r.json()


def test_parallel_folds_equal_sequential_ones(cancer):
    X, y = cancer
    one = cross_validate(LDA(), X, y, 3, 0, n_jobs=1)
    two = cross_validate(LDA(), X, y, 3, 0, n_jobs=2)
    assert one == two
    with joblib.parallel_config(backend="multiprocessing"):  # cannot stream: one batch
        assert cross_validate(LDA(), X, y, 3, 0, n_jobs=2) == one
    assert all(len(curve["fpr"]) <= 200 for curve in one["roc"])


def test_roc_points_are_downsampled_and_give_the_auc(cancer):
    X, y = load_breast_cancer(return_X_y=True)
    cv = cross_validate(LDA(), X, y, 2, 0)
    for fold, curve in zip(cv["folds"], cv["roc"], strict=True):
        assert len(curve["fpr"]) <= 200 and curve["fpr"][0] == 0.0 and curve["tpr"][-1] == 1.0
        assert curve["auc"] == pytest.approx(fold["roc_auc"], abs=2e-3)


def test_search_progress_counts_candidate_fold_fits(cancer):
    X, y = cancer
    spec = model_types()["lda"]
    task = TrainTask(spec=spec, params={}, X=X, y=y)
    task.search = {"grid": {"tol": [1e-4, 1e-3]}, "candidates": [{"tol": 1e-4}, {"tol": 1e-3}],
                   "scoring": "accuracy", "k": 3, "random_state": 0}  # fmt: skip
    task.cv = {"k": 3, "random_state": 0}
    seen: list[float] = []
    out = run_model_selection(task, spec.make_estimator({}), seen.append)
    assert len(seen) == 2 * 3 + 3
    assert seen == sorted(seen) and seen[-1] == pytest.approx(0.85) and seen[0] > 0.15
    assert out["search"]["best_params"] in task.search["candidates"]


def test_grid_search_ties_keep_the_first_candidate(cancer):
    X, y = cancer
    out = grid_search(LDA(), X, y, {"tol": [1e-3, 1e-4]}, "accuracy", 3, 0)
    assert out["results"][0]["mean"] == out["results"][1]["mean"]
    assert out["best_params"] == {"tol": 1e-3}


def test_folds_are_stratified_k_fold(cancer):
    _, y = cancer
    ours = fold_indices(y, 4, 9)
    ref = StratifiedKFold(4, shuffle=True, random_state=9).split(np.zeros(len(y)), y)
    for (a, b), (c, d) in zip(ours, ref, strict=True):
        assert np.array_equal(a, c) and np.array_equal(b, d)


def test_a_search_past_the_training_timeout_names_its_size(make_client):
    """A synchronous search stopped at BSVM_TRAIN_TIMEOUT_S says how many fits it asked for."""
    client = make_client(train_timeout_s=1.0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 10))
    y = (X[:, 0] + rng.normal(scale=2.0, size=4000) > 0).astype(int)
    body = train_body(X, y, "kernel_svm", search={"C": [0.1, 1.0, 10.0, 100.0]},
                      evaluation={"cv": 5})  # fmt: skip
    r = client.post("/train", json=body)
    assert r.status_code == 422 and r.json()["code"] == "TRAINING_TIMEOUT", r.text
    [hint] = r.json()["details"]
    assert hint["field"] == "search"
    assert "4 candidates on 5 folds, 26 fits in all" in hint["problem"]


def test_a_timeout_without_a_search_names_the_data() -> None:
    assert timeout_detail(None, {"k": 5}).field == "X"
    assert (
        "3 candidates on 4 folds, 13 fits"
        in timeout_detail({"candidates": [{}, {}, {}], "k": 4}, None).problem
    )
