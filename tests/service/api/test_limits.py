"""Per-request bounds: model size and kernel cache before a fit, worker memory, predict memory
and concurrency, data that would overflow, and non-convergence reported."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from tests.service.conftest import train_body, wait_for_job
from tests.service.slow_estimator import SLOW_SPEC, slow_task


def test_an_oversized_mcmc_model_is_refused_before_any_work(client):
    """The issue's case: 0.5 MB of request asking for a multi-GB artifact."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(250, 40)), np.arange(250) % 2
    params = {"n_draws": 100_000, "n_chains": 16, "burn_in": 0}
    r = client.post("/train", json={**train_body(X, y, "mcmc_svm"), "params": params})
    assert r.status_code == 422
    (problem,) = r.json()["details"]
    assert problem["field"] == "params.n_draws"
    assert "BSVM_MAX_ARTIFACT_MB" in problem["problem"] and "512" in problem["problem"]
    assert client.get("/jobs").json()["total"] == 0  # refused before a job existed


def test_the_artifact_bound_is_a_setting(make_client, iris):
    client = make_client(max_artifact_mb=1)
    X, y = iris
    params = {"n_draws": 5_000, "n_chains": 4, "burn_in": 0}
    r = client.post("/train", json={**train_body(X, y, "mcmc_svm"), "params": params})
    assert r.status_code == 422 and "1 MiB" in r.json()["details"][0]["problem"]
    small = {"n_draws": 50, "n_chains": 1, "burn_in": 10, "random_state": 0}
    ok = client.post("/train", json={**train_body(X, y, "mcmc_svm"), "params": small})
    assert ok.status_code == 201


def test_the_kernel_cache_is_capped_by_a_setting(make_client, iris):
    client = make_client(max_cache_mb=64)
    X, y = iris
    r = client.post("/train", json={**train_body(X, y, "kernel_svm"), "params": {"cache_mb": 65}})
    assert r.status_code == 422
    assert r.json()["details"][0]["field"] == "params.cache_mb"
    assert "BSVM_MAX_CACHE_MB" in r.json()["details"][0]["problem"]


def test_a_worker_over_its_memory_limit_fails_clearly_and_the_server_lives(make_client, iris):
    client = make_client()
    client.app.state.model_types["slow"] = SLOW_SPEC
    jobs = client.app.state.jobs
    job = jobs.submit(slow_task(allocate_mb=2048, memory_limit_mb=256))
    view = wait_for_job(client, job["job_id"])
    assert view["status"] == "failed" and view["error"]["code"] == "TRAINING_OUT_OF_MEMORY"
    assert "256 MiB" in view["error"]["message"]
    fine = jobs.submit(slow_task(allocate_mb=64, memory_limit_mb=256))
    assert wait_for_job(client, fine["job_id"])["status"] == "succeeded"
    X, y = iris
    assert client.post("/train", json=train_body(X, y)).status_code == 201


@pytest.mark.parametrize("outputs", [["label", "decision", "probability"]])
def test_predictions_in_blocks_equal_predictions_in_one_go(make_client, iris, outputs):
    X, y = iris
    body = {**train_body(X, y, "kernel_svm"), "params": {"probability": True, "random_state": 0}}
    whole = make_client()
    model = whole.post("/train", json=body).json()["model_id"]
    request = {"model": model, "X": X.tolist(), "outputs": outputs}
    expected = whole.post("/predict", json=request).json()
    tiny = make_client(predict_memory_mb=0.001)  # one row per block
    got = tiny.post("/predict", json=request).json()
    assert got["predictions"] == expected["predictions"]
    np.testing.assert_allclose(got["decision_function"], expected["decision_function"], rtol=1e-12)
    # the pairwise coupling is iterative (stopping at 1e-12 on the whole batch, per row here)
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"], atol=1e-8)


def test_intervals_in_blocks_equal_intervals_in_one_go(make_client, iris):
    X, y = iris
    params = {"n_draws": 200, "n_chains": 2, "burn_in": 50, "random_state": 0}
    whole = make_client()
    model = whole.post("/train", json={**train_body(X, y, "mcmc_svm"), "params": params}).json()
    request = {"model": model["model_id"], "X": X.tolist(), "outputs": ["interval"], "level": 0.8}
    expected = whole.post("/predict", json=request).json()["intervals"]
    got = make_client(predict_memory_mb=0.01).post("/predict", json=request).json()["intervals"]
    for key in ("lower", "upper"):
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-12, atol=1e-14)


def test_concurrent_predicts_beyond_the_bound_get_503_with_retry_after(make_client, iris):
    client = make_client(predict_concurrency=1)
    X, y = iris
    model = client.post("/train", json=train_body(X, y)).json()["model_id"]
    request = {"model": model, "X": X[:2].tolist()}
    with client.app.state.predict_gate.slot():  # another predict holds the only slot
        r = client.post("/predict", json=request)
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert "BSVM_PREDICT_CONCURRENCY" in r.json()["error"]
    assert client.post("/predict", json=request).status_code == 200


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "sigmoid"])
def test_values_that_would_overflow_are_refused_at_once(client, kernel):
    X = np.full((8, 2), 1e308) * np.array([[1.0], [-1.0]] * 4)
    y = [0, 1] * 4
    r = client.post(
        "/train", json={**train_body(X, np.array(y), "kernel_svm"), "params": {"kernel": kernel}}
    )
    assert r.status_code == 422  # the input check's refusal, before any solver step:
    assert "overflow float64" in r.json()["error"] and "rescale the features" in r.json()["error"]


def test_mcmc_that_has_not_converged_says_so_in_the_record(client):
    X, y = load_breast_cancer(return_X_y=True)
    params = {"n_draws": 200, "burn_in": 50, "n_chains": 2, "random_state": 0}
    r = client.post("/train", json={**train_body(X, y, "mcmc_svm"), "params": params})
    assert r.status_code == 201
    training = r.json()["training"]
    assert training["converged"] is False
    assert any(
        w.startswith("MCMCConvergenceWarning") and "R-hat" in w for w in training["warnings"]
    )
