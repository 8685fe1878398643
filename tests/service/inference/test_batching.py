"""Micro-batching of one-row predicts: same answers as unbatched, errors kept apart, no mixing."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from service.inference.batching import MicroBatcher

N = 12


def queued(batcher: MicroBatcher, key: str, n: int, timeout_s: float = 30.0) -> None:
    """Block until ``n`` rows of ``key`` wait in ``batcher`` (the test's only sleep)."""
    deadline = time.monotonic() + timeout_s
    while len(batcher._queues.get(key, ())) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{n} rows never queued")
        time.sleep(0.001)


def held_first_call(batcher: MicroBatcher, key: str, n: int, fn):
    """``fn``, whose first call waits until ``n`` more rows of ``key`` are queued behind it."""
    first = threading.Lock()

    def score(X):
        if first.acquire(blocking=False):
            queued(batcher, key, n)
        return fn(X)

    return score


def test_each_request_gets_its_own_row_and_rows_are_batched():
    batcher = MicroBatcher()
    calls: list[int] = []

    def fn(X):
        calls.append(len(X))
        return {"sum": X.sum(axis=1), "rows": X.copy()}

    score = held_first_call(batcher, "m", N - 1, fn)
    rows = np.arange(N * 3, dtype=float).reshape(N, 3)
    with ThreadPoolExecutor(N) as pool:
        futures = [pool.submit(batcher.score, "m", rows[i : i + 1], score) for i in range(N)]
        results = [f.result(timeout=60) for f in futures]
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result["rows"], rows[i : i + 1])
        np.testing.assert_array_equal(result["sum"], rows[i : i + 1].sum(axis=1))
    assert calls == [1, N - 1]
    assert batcher.batches == 2 and batcher.rows == N


def test_an_error_reaches_only_the_request_that_caused_it():
    batcher = MicroBatcher()

    def fn(X):
        if (X[:, 0] < 0).any():
            raise ValueError("negative")
        return {"double": 2 * X[:, 0]}

    score = held_first_call(batcher, "m", N - 1, fn)
    rows = np.arange(N, dtype=float).reshape(N, 1)
    rows[5] = -1.0
    with ThreadPoolExecutor(N) as pool:
        futures = [pool.submit(batcher.score, "m", rows[i : i + 1], score) for i in range(N)]
        for i, future in enumerate(futures):
            if i == 5:
                with pytest.raises(ValueError, match="negative"):
                    future.result(timeout=60)
            else:
                np.testing.assert_array_equal(future.result(timeout=60)["double"], [2.0 * i])


def test_models_are_never_mixed_in_a_batch():
    batcher = MicroBatcher()
    seen: dict[str, list[np.ndarray]] = {"a": [], "b": []}

    def scorer(key: str, offset: float):
        def fn(X):
            seen[key].append(X.copy())
            return {"value": X[:, 0] + offset}

        return held_first_call(batcher, key, N // 2 - 1, fn)

    scores = {"a": scorer("a", 1000.0), "b": scorer("b", 2000.0)}
    keys = ["a" if i % 2 else "b" for i in range(N)]
    rows = np.arange(N, dtype=float).reshape(N, 1)
    with ThreadPoolExecutor(N) as pool:
        futures = [
            pool.submit(batcher.score, keys[i], rows[i : i + 1], scores[keys[i]]) for i in range(N)
        ]
        values = [f.result(timeout=60)["value"][0] for f in futures]
    for i, key in enumerate(keys):
        assert values[i] == i + (1000.0 if key == "a" else 2000.0)
    for key in seen:
        got = np.concatenate(seen[key])[:, 0]
        assert sorted(got) == [i for i in range(N) if keys[i] == key]


def test_a_lone_request_does_not_wait():
    batcher = MicroBatcher(wait_s=3600.0)
    result = batcher.score("m", np.ones((1, 2)), lambda X: {"sum": X.sum(axis=1)})
    np.testing.assert_array_equal(result["sum"], [2.0])
    assert batcher.last_rows == 1


def test_batched_predicts_through_the_app_equal_unbatched(make_client):
    X, y = load_breast_cancer(return_X_y=True)
    plain = make_client()
    batched = make_client(
        predict_batching=True, predict_batch_wait_us=20_000, predict_concurrency=64
    )
    ids = {}
    for outputs, params in (
        ("decision", {"C": 1.0}),
        ("probability", {"C": 1.0, "probability": True}),
    ):
        body = {"model_type": "kernel_svm", "params": params, "X": X.tolist(), "y": y.tolist()}
        r = plain.post("/train", json=body)
        assert r.status_code == 201, r.text
        ids[outputs] = r.json()["model_id"]
    requests = [
        {"model": ids[kind], "X": [X[i].tolist()], "outputs": ["label", kind]}
        for i in range(40)
        for kind in ("decision", "probability")
    ]
    requests.append({"model": ids["decision"], "X": [X[0, :5].tolist()]})  # 422: 5 features

    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda body: batched.post("/predict", json=body), requests))
    want = [plain.post("/predict", json=body) for body in requests]
    assert [r.status_code for r in got] == [r.status_code for r in want] == [200] * 80 + [422]
    for g, w in zip(got[:-1], want[:-1], strict=True):
        g, w = g.json(), w.json()
        assert g["model_id"] == w["model_id"] and g["predictions"] == w["predictions"]
        for key in ("decision_function", "probabilities"):
            if w.get(key) is not None:  # BLAS may round a row of a matrix product otherwise
                np.testing.assert_allclose(g[key], w[key], rtol=0, atol=1e-12)
    batcher = batched.app.state.predict_batcher
    assert batcher.rows == 80
