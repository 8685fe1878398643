"""POST /train with data by reference: the 422s before any job, jobs from Parquet, CSV and S3."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.model_types import model_types
from service.settings import Settings
from service.training.fitting import with_preprocessing
from tests.service.conftest import BUCKET, wait_for_job

N_FILES = 3
MANY_PASSES = {"tol": 1e-300, "max_iter": 100_000}
"""An EM that stops at ``max_iter`` only: one pass per iteration, long after the test acts."""
MCMC = {"n_draws": 300, "burn_in": 50, "n_chains": 2, "random_state": 0}


def iris_table(iris: tuple[np.ndarray, np.ndarray]) -> pa.Table:
    X, y = iris
    return pa.table({**{f"f{j}": X[:, j] for j in range(X.shape[1])}, "label": y})


def write_shards(table: pa.Table, folder: Path, fmt: str) -> None:
    """``table`` cut into consecutive shards (row order kept), Parquet with two row groups each."""
    folder.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, table.num_rows, N_FILES + 1).astype(int)
    for i in range(N_FILES):
        shard = table.slice(bounds[i], bounds[i + 1] - bounds[i])
        if fmt == "parquet":
            pq.write_table(shard, folder / f"part-{i}.parquet", row_group_size=30)
        else:
            pcsv.write_csv(shard, folder / f"part-{i}.csv")


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory, iris: Any) -> Path:
    root = tmp_path_factory.mktemp("data")
    table = iris_table(iris)
    write_shards(table, root / "in" / "iris-pq", "parquet")
    write_shards(table.slice(0, 100), root / "in" / "iris-csv", "csv")  # under max_rows
    pq.write_table(
        table.filter(pa.compute.equal(table["label"], "setosa")), root / "in" / "one.parquet"
    )
    pq.write_table(
        table.append_column("name", pa.array(["x"] * table.num_rows)), root / "in" / "str.parquet"
    )
    (root / "out").mkdir()
    pq.write_table(table, root / "out" / "secret.parquet")
    return root


@pytest.fixture(scope="module")
def client(
    data_root: Path, s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("app"),
        log_level="warning",
        data_urls=f"file://{data_root}/in/,s3://{BUCKET}/in/",
        s3_endpoint_url=s3_endpoint,
        max_rows=120,
        job_lease_s=2,  # progress written every 0.4 s
    )
    # the training workers read S3 with the server's credentials, from the environment the
    # forkserver started with: restart it now that the moto fixture has set them
    import gc
    from multiprocessing import forkserver

    # _stop waits for the forkserver, which lives while any worker it forked does: a warm
    # worker of an earlier test's executor, unreachable but not yet collected, would wait on
    # its task pipe for ever (collecting closes that pipe, and the worker ends)
    gc.collect()
    forkserver._forkserver._stop()
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def body(uri: str, model_type: str = "lda", fmt: str = "parquet", **extra: Any) -> dict:
    data = {"uri": uri, "format": fmt, "target": "label", **extra.pop("data", {})}
    return {"model_type": model_type, "data": data, **extra}


def refused(client: TestClient, payload: dict, field: str) -> str:
    answer = client.post("/train", json=payload)
    assert answer.status_code == 422, answer.text
    details = answer.json()["details"]
    assert [d["field"] for d in details] == [field], details
    return details[0]["problem"]


def job_of(client: TestClient, payload: dict) -> dict:
    answer = client.post("/train", json=payload)
    assert answer.status_code == 202, answer.text
    assert answer.headers["Location"] == f"/jobs/{answer.json()['job_id']}"
    return wait_for_job(client, answer.json()["job_id"])


OUTPUT_METHODS = {"probabilities": "predict_proba", "decision_function": "decision_function"}


def in_memory(record: dict, X: np.ndarray, y: np.ndarray) -> Any:
    """The model of ``record``'s type and parameters fitted on ``X, y`` in memory, as the
    posted-rows path fits it."""
    spec = model_types()[record["model_type"]]
    params = {k: v for k, v in record["params"].items() if k not in spec.fixed}
    model = with_preprocessing(spec.make_estimator(params), record["preprocess"])
    return model.fit(X, y)


def predict(client: TestClient, model: str, X: np.ndarray, output: str) -> np.ndarray:
    """``output`` of ``model`` for ``X``, asked 100 rows at a time (the app's max_rows is 120)."""
    answers = []
    for start in range(0, len(X), 100):
        rows = X[start : start + 100].tolist()
        answer = client.post("/predict", json={"model": model, "X": rows, "outputs": [output]})
        assert answer.status_code == 200, answer.text
        answers.append(np.asarray(answer.json()[output]))
    return np.concatenate(answers)


# -- checked before any job ------------------------------------------------------------------
def test_checks_before_any_job(client: TestClient, data_root: Path) -> None:
    pq_uri = f"file://{data_root}/in/iris-pq/*.parquet"
    assert "outside" in refused(client, body(f"file://{data_root}/out/secret.parquet"), "data.uri")
    assert "outside" in refused(
        client, body(f"file://{data_root}/in/../out/secret.parquet"), "data.uri"
    )
    assert "s3:// or file://" in refused(client, body("http://127.0.0.1/x.parquet"), "data.uri")
    assert "no files match" in refused(
        client, body(f"file://{data_root}/in/none-*.parquet"), "data.uri"
    )
    assert "does not exist" in refused(
        client, body(f"file://{data_root}/in/gone.parquet"), "data.uri"
    )
    assert "cannot read" in refused(
        client, body(f"file://{data_root}/in/iris-csv/part-0.csv"), "data.uri"
    )
    assert "no column 'species'" in refused(
        client, body(pq_uri, data={"target": "species"}), "data.target"
    )
    assert "no column 'f9'" in refused(
        client, body(pq_uri, data={"features": ["f0", "f1", "f2", "f9"]}), "data.features[3]"
    )
    assert "not a number" in refused(
        client,
        body(f"file://{data_root}/in/str.parquet", data={"features": ["f0", "name"]}),
        "data.features[1]",
    )
    assert "'name'" in refused(client, body(f"file://{data_root}/in/str.parquet"), "data.features")
    assert "one class" in refused(client, body(f"file://{data_root}/in/one.parquet"), "data.target")
    assert "BSVM_MAX_ROWS" in refused(client, body(pq_uri, "kernel_svm"), "data.uri")
    assert "not supported by reference" in refused(
        client, body(pq_uri, evaluation={"cv": 3}), "evaluation.cv"
    )
    assert "not supported by reference" in refused(
        client, body(pq_uri, search={"tol": [1e-3]}), "search"
    )
    assert "either" in refused(client, {**body(pq_uri), "X": [[1.0]], "y": [1]}, "X")
    assert client.get("/jobs").json()["total"] == 0  # every refusal came before any job


def test_off_without_the_setting(make_client: Any, data_root: Path) -> None:
    off = make_client()
    problem = refused(off, body(f"file://{data_root}/in/iris-pq/"), "data.uri")
    assert "BSVM_DATA_URLS" in problem


# -- jobs ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model_type", "fmt", "output"),
    [("lda", "parquet", "probabilities"), ("linear_svm", "csv", "decision_function")],
)
def test_a_job_from_files_fits_as_posted_rows_do(
    client: TestClient, data_root: Path, iris: Any, model_type: str, fmt: str, output: str
) -> None:
    n = 150 if fmt == "parquet" else 100
    X, y = iris[0][:n], iris[1][:n]
    folder = "iris-pq" if fmt == "parquet" else "iris-csv"
    name = f"ref-{model_type}"
    job = job_of(client, body(f"file://{data_root}/in/{folder}/", model_type, fmt, name=name))
    assert job["status"] == "succeeded", job
    record = client.get(f"/models/{job['model_id']}").json()
    assert record["data"]["rows"] == n and record["data"]["n_files"] == N_FILES
    assert record["feature_names"] == ["f0", "f1", "f2", "f3"] and record["target"] == "label"
    assert record["training"]["n_samples"] == n
    expected = in_memory(record, X, y)
    np.testing.assert_allclose(
        predict(client, name, X, output), getattr(expected, OUTPUT_METHODS[output])(X), atol=1e-6
    )


def test_a_one_vs_one_bayesian_job_from_files_fits_as_posted_rows_do(
    client: TestClient, data_root: Path, iris: Any
) -> None:
    params = {"alpha": 1.0, "multiclass": "ovo"}
    payload = body(f"file://{data_root}/in/iris-pq/", "em_svm", name="ref-em-ovo", params=params)
    job = job_of(client, payload)
    assert job["status"] == "succeeded", job
    record = client.get(f"/models/{job['model_id']}").json()
    assert record["params"]["multiclass"] == "ovo"
    X, y = iris
    expected = in_memory(record, X, y)
    np.testing.assert_allclose(
        predict(client, "ref-em-ovo", X, "decision_function"), expected.decision_function(X),
        atol=1e-6,
    )  # fmt: skip
    rows = client.get("/models/ref-em-ovo/posterior").json()["coefficients"]
    assert {(r["class"], r["versus"]) for r in rows} == {
        ("versicolor", "setosa"),
        ("virginica", "setosa"),
        ("virginica", "versicolor"),
    }


def test_no_nu_path_by_reference(client: TestClient, data_root: Path) -> None:
    """The ν path and the comparison refit on every row: by reference they are said to be
    missing from the record the job stores, never pending (no race with the path's step)."""
    job = job_of(client, body(f"file://{data_root}/in/iris-pq/", "em_svm", name="ref-em-path"))
    assert job["status"] == "succeeded", job
    for route in ("path", "path.png", "compare.png"):
        answer = client.get(f"/models/ref-em-path/{route}")
        assert answer.status_code == 409, answer.text
        assert "not ready" not in answer.json()["error"], answer.text
        assert "by reference" in answer.json()["details"][0]["problem"], answer.text


def test_kernel_svm_from_s3_with_a_held_out_split(
    client: TestClient, s3_endpoint: str, iris: Any
) -> None:
    import boto3

    X, y = iris
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    for i, rows in enumerate(np.array_split(np.arange(0, 150, 2), 2)):
        sink = pa.BufferOutputStream()
        pq.write_table(iris_table((X[rows], y[rows])), sink)
        s3.put_object(
            Bucket=BUCKET, Key=f"in/kernel/part-{i}.parquet", Body=sink.getvalue().to_pybytes()
        )
    job = job_of(
        client,
        body(f"s3://{BUCKET}/in/kernel/*.parquet", "kernel_svm", name="ref-kernel",
             evaluation={"test_fraction": 0.2, "random_state": 3}),
    )  # fmt: skip
    assert job["status"] == "succeeded", job
    record = client.get(f"/models/{job['model_id']}").json()
    assert record["data"]["files"][0] == f"s3://{BUCKET}/in/kernel/part-0.parquet"
    assert record["metrics"]["heldout"]["n_samples"] == 15
    assert record["training"]["n_samples"] == 60


def test_an_object_deleted_mid_job_fails_the_job_naming_it(
    client: TestClient, data_root: Path, iris: Any
) -> None:
    """Deleted once the fit has made a pass of its own (an EM of many passes, one per
    iteration): the next pass fails on it."""
    folder = data_root / "in" / "doomed"
    write_shards(iris_table(iris), folder, "parquet")
    payload = body(f"file://{folder}/", "em_svm", name="doomed", params=MANY_PASSES)
    job_id = client.post("/train", json=payload).json()["job_id"]
    while True:
        job = client.get(f"/jobs/{job_id}").json()
        assert job["status"] == "running", job
        if (job["progress_detail"] or {}).get("iterations"):
            break
        time.sleep(0.02)
    (folder / "part-1.parquet").unlink()
    job = wait_for_job(client, job_id)
    assert job["status"] == "failed"
    assert "part-1.parquet" in job["error"]["message"]
    assert job["error"]["details"][0]["field"] == "data.uri"
    assert job["progress_detail"]["stage"] == "fitting"
    assert client.get("/models/doomed").status_code == 404


def test_progress_counts_passes_partitions_and_iterations(
    client: TestClient, data_root: Path
) -> None:
    payload = body(f"file://{data_root}/in/iris-pq/", "mcmc_svm", name="progress", params=MCMC)
    job_id = client.post("/train", json=payload).json()["job_id"]
    views = []
    while not views or views[-1]["status"] in ("queued", "running"):
        views.append(client.get(f"/jobs/{job_id}").json())
        time.sleep(0.02)
    assert views[-1]["status"] == "succeeded", views[-1]
    fractions = [v["progress"] for v in views]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    details = [v["progress_detail"] for v in views if v["progress_detail"]]
    assert len({(d["pass"], d["partitions_done"]) for d in details}) > 2  # it moved
    order = [(d["pass"], d["partitions_done"], d["iterations"] or 0) for d in details]
    assert order == sorted(order)
    last = details[-1]
    assert last["stage"] == "evaluating" and last["partitions_done"] == last["partitions"] == 6
    record = client.get(f"/models/{views[-1]['model_id']}").json()
    assert last["pass"] == record["training"]["passes"]
    assert 0 < last["iterations"] < last["pass"]


def test_cancel(client: TestClient, data_root: Path) -> None:
    answer = client.post("/train", json=body(f"file://{data_root}/in/iris-pq/", name="cancelled"))
    assert answer.status_code == 202
    cancelled = client.delete(f"/jobs/{answer.json()['job_id']}")
    assert cancelled.status_code == 200
    job = wait_for_job(client, answer.json()["job_id"])
    assert job["status"] in ("cancelled", "succeeded")
