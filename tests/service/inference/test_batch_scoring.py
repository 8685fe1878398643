"""``POST /batch-predictions`` end to end: local Parquet and CSV, moto S3, a Dask LocalCluster.

Every output is compared with ``POST /predict`` on the same rows; the output prefix is checked
to be write-once (``_SUCCESS`` last, nothing left by a failed or cancelled job).
"""

from __future__ import annotations

import json
import threading
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
from service.data.writing import STAGING, SUCCESS
from service.errors import ApiError, TrainingCancelled, TrainingTimeout
from service.inference.batch_scoring import BatchPlan, plan_batch, run_batch
from service.repository.jobs import new_job_id
from service.schemas.batch import BatchPredictRequest
from service.settings import Settings
from tests.service.conftest import BUCKET, train_body, wait_for_job

FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
MCMC = {"alpha": 2.0, "nu": 1.0, "n_draws": 200, "burn_in": 50, "n_chains": 2, "random_state": 0}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("batch-data")


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("batch-app")


def _settings(app_dir: Path, data_dir: Path, s3: str, **extra: Any) -> Settings:
    urls = [f"file://{data_dir}/", f"s3://{BUCKET}/batch/"]
    return Settings(
        data_dir=app_dir, log_level="warning", data_urls=urls, s3_endpoint_url=s3, **extra
    )


@pytest.fixture(scope="module")
def client(app_dir: Path, data_dir: Path, s3_endpoint: str, iris: Any) -> Iterator[TestClient]:
    """An app allowed to read and write ``data_dir`` and the bucket's ``batch/``, with an LDA
    (three classes), an MCMC SVM (two classes, intervals) and a one-vs-one MCMC SVM (three
    classes, intervals per pair) trained on named iris features."""
    with TestClient(create_app(_settings(app_dir, data_dir, s3_endpoint))) as client:
        X, y = iris
        lda = train_body(X, y, "lda", name="iris-lda", feature_names=FEATURES)
        assert client.post("/train", json=lda).status_code == 201
        binary = y != "setosa"
        mcmc = train_body(
            X[binary], y[binary], "mcmc_svm", name="iris-mcmc", feature_names=FEATURES, params=MCMC
        )
        assert client.post("/train", json=mcmc).status_code == 201
        ovo = train_body(
            X, y, "mcmc_svm", name="iris-mcmc-ovo", feature_names=FEATURES,
            params={**MCMC, "multiclass": "ovo"},
        )  # fmt: skip
        assert client.post("/train", json=ovo).status_code == 201
        yield client


def _frame(X: np.ndarray, ids: np.ndarray) -> pa.Table:
    """Columns in another order than the model's, an id column, an unused column."""
    columns = {"id": ids, "note": np.array([f"r{i}" for i in ids])}
    for j in reversed(range(X.shape[1])):
        columns[FEATURES[j]] = X[:, j]
    return pa.table(columns)


def _write_parts(folder: Path, X: np.ndarray, fmt: str, parts: int = 3) -> list[np.ndarray]:
    """``X`` split into ``parts`` files of ``folder``; the ids of each part's rows."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = np.arange(len(X)) * 7 % len(X)  # not sorted: order is checked by id
    chunks = np.array_split(np.arange(len(X)), parts)
    for i, rows in enumerate(chunks):
        table = _frame(X[rows], ids[rows])
        path = folder / f"in-{i}.{fmt}"
        pq.write_table(table, path) if fmt == "parquet" else pcsv.write_csv(table, path)
    return [ids[rows] for rows in chunks]


def _read(path: Path | str, fmt: str, filesystem: Any = None) -> pa.Table:
    if fmt == "parquet":
        return pq.read_table(path, filesystem=filesystem)
    return pcsv.read_csv(path)


def _expected(client: TestClient, model: str, X: np.ndarray, outputs: list[str]) -> dict:
    body = {"model": model, "X": X.tolist(), "outputs": outputs, "level": 0.9}
    answer = client.post("/predict", json=body, headers={"Accept": "text/csv"})
    assert answer.status_code == 200, answer.text
    return pcsv.read_csv(pa.py_buffer(answer.content)).to_pydict()


def _submit(client: TestClient, body: dict) -> dict:
    response = client.post("/batch-predictions", json=body)
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/jobs/{response.json()['job_id']}"
    assert response.json()["kind"] == "batch_predict"
    return wait_for_job(client, response.json()["job_id"])


def _check_answer(
    client: TestClient,
    model: str,
    X: np.ndarray,
    ids: list[np.ndarray],
    outputs: list[str],
    tables: list[pa.Table],
) -> None:
    """Each output table keeps its input's rows in order and equals ``POST /predict``."""
    assert [t.num_rows for t in tables] == [len(i) for i in ids]
    expected = _expected(client, model, X, outputs)
    got = pa.concat_tables(tables).to_pydict()
    assert list(got) == ["id", *expected]  # keep_columns first, then the CSV answer's columns
    assert got["id"] == list(np.concatenate(ids))
    for name, values in expected.items():
        if isinstance(values[0], str):
            assert got[name] == values, name
        else:
            np.testing.assert_allclose(got[name], values, rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize(
    ("fmt", "model", "outputs"),
    [
        ("parquet", "iris-lda", ["predictions", "decision_function", "probabilities"]),
        ("csv", "iris-mcmc", ["predictions", "decision_function", "intervals"]),
        ("parquet", "iris-mcmc-ovo", ["predictions", "intervals"]),
    ],
)
def test_local_files_equal_predict(
    client: TestClient, data_dir: Path, iris: Any, fmt: str, model: str, outputs: list[str]
) -> None:
    X, y = iris
    if model == "iris-mcmc":
        X = X[y != "setosa"]
    ids = _write_parts(data_dir / f"in-{model}-{fmt}", X, fmt)
    out = data_dir / f"out-{model}-{fmt}"
    body = {
        "model": model,
        "input": {"uri": f"file://{data_dir}/in-{model}-{fmt}/*.{fmt}", "format": fmt},
        "output": {"uri": f"file://{out}/", "format": fmt},
        "outputs": outputs,
        "keep_columns": ["id"],
        "level": 0.9,
    }
    job = _submit(client, body)
    assert job["status"] == "succeeded", job
    assert job["progress"] == 1.0 and job["name"] == model
    result = job["result"]
    assert result["rows"] == len(X) and result["output_uri"] == f"file://{out}/"
    names = [f"part-{i:05d}.{fmt}" for i in range(3)]
    assert result["files"] == [f"file://{out}/{name}" for name in names]
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, SUCCESS])
    manifest = json.loads((out / SUCCESS).read_text())
    assert manifest["files"] == names and manifest["rows"] == len(X)
    _check_answer(client, model, X, ids, outputs, [_read(out / n, fmt) for n in names])
    if model == "iris-mcmc-ovo":  # one interval column per pair, named by it
        columns = _read(out / names[0], fmt).column_names
        pairs = ["versicolor_vs_setosa", "virginica_vs_setosa", "virginica_vs_versicolor"]
        assert [c for c in columns if c.startswith("interval_lower")] == [
            f"interval_lower_{pair}" for pair in pairs
        ]

    again = client.post("/batch-predictions", json=body)  # write-once: never overwritten
    assert again.status_code == 409, again.text
    assert again.json()["details"][0]["field"] == "output.uri"


def test_s3_parquet(client: TestClient, s3_endpoint: str, iris: Any, tmp_path: Path) -> None:
    import s3fs

    X, _ = iris
    ids = _write_parts(tmp_path / "in", X, "parquet", parts=2)
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint, skip_instance_cache=True)
    for i in range(2):
        fs.put(str(tmp_path / "in" / f"in-{i}.parquet"), f"{BUCKET}/batch/in/in-{i}.parquet")
    body = {
        "model": "iris-lda",
        "input": {"uri": f"s3://{BUCKET}/batch/in/", "format": "parquet"},
        "output": {"uri": f"s3://{BUCKET}/batch/out/run-1/", "format": "parquet"},
        "outputs": ["predictions", "probabilities"],
        "keep_columns": ["id"],
    }
    job = _submit(client, body)
    assert job["status"] == "succeeded", job
    listed = sorted(p.rsplit("/", 1)[1] for p in fs.find(f"{BUCKET}/batch/out/run-1/"))
    assert listed == ["_SUCCESS", "part-00000.parquet", "part-00001.parquet"]
    tables = [
        _read(f"{BUCKET}/batch/out/run-1/part-0000{i}.parquet", "parquet", fs) for i in range(2)
    ]
    _check_answer(client, "iris-lda", X, ids, body["outputs"], tables)


def test_input_and_output_on_different_filesystems(
    client: TestClient, s3_endpoint: str, data_dir: Path, iris: Any
) -> None:
    """Local files scored into the bucket, and the bucket's files into a local folder."""
    import s3fs

    X, _ = iris
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint, skip_instance_cache=True)
    ids = _write_parts(data_dir / "mixed-in", X, "parquet", parts=2)
    for i in range(2):
        fs.put(
            str(data_dir / "mixed-in" / f"in-{i}.parquet"),
            f"{BUCKET}/batch/mixed-in/in-{i}.parquet",
        )
    names = ["part-00000.parquet", "part-00001.parquet"]
    outputs = ["predictions", "probabilities"]
    to_bucket = {
        "model": "iris-lda",
        "input": {"uri": f"file://{data_dir}/mixed-in/", "format": "parquet"},
        "output": {"uri": f"s3://{BUCKET}/batch/mixed-out/", "format": "parquet"},
        "outputs": outputs,
        "keep_columns": ["id"],
    }
    job = _submit(client, to_bucket)
    assert job["status"] == "succeeded", job
    listed = sorted(p.rsplit("/", 1)[1] for p in fs.find(f"{BUCKET}/batch/mixed-out/"))
    assert listed == [SUCCESS, *names]
    tables = [_read(f"{BUCKET}/batch/mixed-out/{n}", "parquet", fs) for n in names]
    _check_answer(client, "iris-lda", X, ids, outputs, tables)

    out = data_dir / "mixed-out"
    to_folder = {
        **to_bucket,
        "input": {"uri": f"s3://{BUCKET}/batch/mixed-in/", "format": "parquet"},
        "output": {"uri": f"file://{out}/", "format": "parquet"},
    }
    job = _submit(client, to_folder)
    assert job["status"] == "succeeded", job
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, SUCCESS])
    _check_answer(client, "iris-lda", X, ids, outputs, [_read(out / n, "parquet") for n in names])


def _body(data_dir: Path, **changes: Any) -> dict:
    body = {
        "model": "iris-lda",
        "input": {"uri": f"file://{data_dir}/in-parquet/", "format": "parquet"},
        "output": {"uri": f"file://{data_dir}/refused/", "format": "parquet"},
    }
    return {**body, **changes}


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"input": {"uri": "file:///etc/passwd"}}, "input.uri", "outside"),
        ({"input": {"uri": "file://{d}/in-parquet/../../x/"}}, "input.uri", "outside"),
        ({"input": {"uri": "file://{d}/%2e%2e/x/"}}, "input.uri", "outside"),
        ({"input": {"uri": "http://example.com/x.parquet"}}, "input.uri", "s3:// or file://"),
        ({"output": {"uri": "s3://other-bucket/out/"}}, "output.uri", "outside"),
        ({"keep_columns": ["nope"]}, "keep_columns", "nope"),
        ({"keep_columns": ["id", "id"]}, "keep_columns", "distinct"),
        ({"model": "iris-lda", "outputs": ["intervals"]}, "outputs", "interval"),
    ],
)
def test_refused_before_the_job(
    client: TestClient, data_dir: Path, iris: Any, changes: dict, field: str, words: str
) -> None:
    _write_parts(data_dir / "in-parquet", iris[0], "parquet")
    text = json.dumps(changes).replace("{d}", str(data_dir))
    before = client.get("/jobs").json()["total"]
    response = client.post("/batch-predictions", json=_body(data_dir, **json.loads(text)))
    assert response.status_code in (409, 422), response.text
    detail = response.json()["details"][0]
    assert detail["field"] == field and words in detail["problem"], detail
    assert client.get("/jobs").json()["total"] == before  # no job was queued
    assert not (data_dir / "refused").exists()


def test_symlink_out_of_the_allowed_folder(
    client: TestClient, data_dir: Path, tmp_path: Path
) -> None:
    (data_dir / "link").symlink_to(tmp_path, target_is_directory=True)
    body = _body(data_dir, input={"uri": f"file://{data_dir}/link/"})
    response = client.post("/batch-predictions", json=body)
    assert response.status_code == 422 and response.json()["details"][0]["field"] == "input.uri"


def test_missing_feature_columns_are_named(client: TestClient, data_dir: Path) -> None:
    folder = data_dir / "narrow"
    folder.mkdir()
    pq.write_table(pa.table({"sepal_length": [1.0], "petal_width": [2.0]}), folder / "a.parquet")
    body = _body(data_dir, input={"uri": f"file://{folder}/a.parquet"})
    response = client.post("/batch-predictions", json=body)
    assert response.status_code == 422
    problem = response.json()["details"][0]["problem"]
    assert "sepal_width" in problem and "petal_length" in problem


def test_keep_columns_may_not_clash_with_the_answer(client: TestClient, data_dir: Path) -> None:
    folder = data_dir / "clash"
    folder.mkdir()
    columns = {name: [1.0] for name in FEATURES}
    pq.write_table(pa.table({**columns, "label": ["x"]}), folder / "a.parquet")
    body = _body(data_dir, input={"uri": f"file://{folder}/"}, keep_columns=["label"])
    response = client.post("/batch-predictions", json=body)
    assert response.status_code == 422
    assert response.json()["details"][0] == {
        "field": "keep_columns",
        "problem": "['label'] are names of answer columns",
    }


def test_off_without_the_setting(make_client: Any, data_dir: Path) -> None:
    response = make_client().post("/batch-predictions", json=_body(data_dir))
    assert response.status_code == 422
    detail = response.json()["details"][0]
    assert detail["field"] == "input.uri" and "BSVM_DATA_URLS" in detail["problem"]


def test_a_failed_partition_leaves_nothing(client: TestClient, data_dir: Path, iris: Any) -> None:
    X = iris[0].copy()
    folder = data_dir / "bad"
    _write_parts(folder, X, "parquet")
    X[-1, 0] = np.nan  # the last partition fails, after the others were written
    table = _frame(X[-50:], np.arange(50))
    pq.write_table(table, folder / "in-2.parquet")
    out = data_dir / "bad-out"
    body = _body(data_dir, input={"uri": f"file://{folder}/"}, output={"uri": f"file://{out}/"})
    job = _submit(client, body)
    assert job["status"] == "failed" and job["error"]["code"] == "INVALID_INPUT", job
    assert "sepal_length" in job["error"]["details"][0]["problem"]
    assert not out.exists() or not any(out.rglob("*"))  # no _SUCCESS, no part, no staging


def test_a_prefix_another_active_job_writes_to_is_a_409(
    client: TestClient, data_dir: Path, iris: Any
) -> None:
    _write_parts(data_dir / "in-busy", iris[0], "parquet")
    out = data_dir / "busy-out"
    body = _body(
        data_dir, input={"uri": f"file://{data_dir}/in-busy/"}, output={"uri": f"file://{out}/"}
    )
    state = client.app.state
    plan = plan_batch(BatchPredictRequest.model_validate(body), state.store, state.settings)
    holder = new_job_id()  # a job another process runs (its lease is long): it holds the prefix
    state.jobs.job_store.add(
        holder,
        "lda",
        "iris-lda",
        plan.to_bytes(),
        100,
        kind="batch_predict",
        claim=("elsewhere:1:x", 3600.0),
        target=plan.output_url,
    )
    try:
        response = client.post("/batch-predictions", json=body)
        assert response.status_code == 409, response.text
        (detail,) = response.json()["details"]
        assert detail["field"] == "output.uri" and holder in detail["problem"]
    finally:
        state.jobs.job_store.finish_if(holder, "running", "cancelled")
    job = _submit(client, body)  # the prefix is free once the holder has ended
    assert job["status"] == "succeeded", job


def _plan(
    client: TestClient, data_dir: Path, iris: Any, name: str, settings: Settings | None = None
) -> tuple[BatchPlan, Path]:
    """The checked plan (through its bytes, as a job keeps it) of scoring iris written as three
    Parquet files under ``in-<name>/``, into ``<name>-out/``; and that output folder."""
    _write_parts(data_dir / f"in-{name}", iris[0], "parquet")
    out = data_dir / f"{name}-out"
    request = BatchPredictRequest.model_validate(
        _body(
            data_dir,
            input={"uri": f"file://{data_dir}/in-{name}/"},
            output={"uri": f"file://{out}/"},
        )
    )
    store = client.app.state.store
    chosen = settings or client.app.state.settings
    return BatchPlan.from_bytes(plan_batch(request, store, chosen).to_bytes()), out


def test_a_cancel_leaves_nothing(client: TestClient, data_dir: Path, iris: Any) -> None:
    plan, out = _plan(client, data_dir, iris, "cancel")
    state = client.app.state
    cancelled = threading.Event()

    def progress(fraction: float, detail: Any = None) -> None:
        assert (out / STAGING).is_dir() and not (out / SUCCESS).exists()
        cancelled.set()  # after the first partition was staged

    with pytest.raises(TrainingCancelled):
        run_batch(plan, "j_" + "0" * 32, state.store, state.settings, cancelled, progress)
    assert not any(out.rglob("*"))


def test_a_batch_past_its_time_limit_fails_and_leaves_nothing(
    client: TestClient, data_dir: Path, iris: Any
) -> None:
    state = client.app.state
    settings = state.settings.model_copy(update={"batch_timeout_s": 0.5})
    plan, out = _plan(client, data_dir, iris, "slow", settings)
    written: list[float] = []

    def progress(fraction: float, detail: Any = None) -> None:
        written.append(fraction)
        time.sleep(0.6)  # the first partition is staged; the limit passes before the second

    with pytest.raises(TrainingTimeout) as failure:
        run_batch(plan, "j_" + "2" * 32, state.store, settings, threading.Event(), progress)
    assert written == [pytest.approx(1 / 3)]  # stopped at the next block, not after every file
    assert "time limit of 0.5 s" in failure.value.message
    assert "BSVM_BATCH_TIMEOUT_S" in failure.value.details[0].problem
    assert not any(out.rglob("*"))


def test_a_limit_that_passes_after_the_last_file_loses_nothing(
    client: TestClient, data_dir: Path, iris: Any
) -> None:
    state = client.app.state
    settings = state.settings.model_copy(update={"batch_timeout_s": 0.5})
    plan, out = _plan(client, data_dir, iris, "just", settings)

    def progress(fraction: float, detail: Any = None) -> None:
        if fraction == 1.0:
            time.sleep(0.6)  # every file is scored and staged; the limit passes before the commit

    result = run_batch(plan, "j_" + "3" * 32, state.store, settings, threading.Event(), progress)
    assert result["rows"] == len(iris[0]) and (out / SUCCESS).exists()


def test_a_batch_job_past_its_time_limit_ends_failed(
    client: TestClient, data_dir: Path, iris: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_parts(data_dir / "in-late", iris[0], "parquet")
    out = data_dir / "late-out"
    monkeypatch.setattr(client.app.state.settings, "batch_timeout_s", 1e-9)
    body = _body(
        data_dir, input={"uri": f"file://{data_dir}/in-late/"}, output={"uri": f"file://{out}/"}
    )
    job = _submit(client, body)
    assert job["status"] == "failed", job
    assert job["error"]["code"] == "TRAINING_TIMEOUT", job
    assert job["error"]["details"][0]["field"] == "input.uri"
    assert not out.exists() or not any(out.rglob("*"))


def test_an_input_deleted_mid_job_fails_naming_it_and_leaves_nothing(
    client: TestClient, data_dir: Path, iris: Any
) -> None:
    folder = data_dir / "in-doomed"
    _write_parts(folder, iris[0], "parquet")
    doomed = sorted(folder.iterdir())[-1]
    out = data_dir / "doomed-out"
    request = BatchPredictRequest.model_validate(
        _body(data_dir, input={"uri": f"file://{folder}/"}, output={"uri": f"file://{out}/"})
    )
    state = client.app.state
    plan = BatchPlan.from_bytes(plan_batch(request, state.store, state.settings).to_bytes())

    def progress(fraction: float, detail: Any = None) -> None:
        if doomed.exists():  # after the first file was scored and staged: the last one goes
            assert (out / STAGING).is_dir()
            doomed.unlink()

    with pytest.raises(ApiError) as failure:
        run_batch(plan, "j_" + "1" * 32, state.store, state.settings, threading.Event(), progress)
    assert doomed.name in failure.value.message, failure.value.message
    assert not any(out.rglob("*"))  # no _SUCCESS, no part, no staging


def test_on_a_dask_local_cluster(
    client: TestClient, app_dir: Path, data_dir: Path, s3_endpoint: str, iris: Any
) -> None:
    from distributed import LocalCluster

    X, _ = iris
    ids = _write_parts(data_dir / "in-dask", X, "parquet")
    out = data_dir / "out-dask"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
        settings = _settings(
            app_dir, data_dir, s3_endpoint, dask_scheduler=cluster.scheduler_address
        )
        with TestClient(create_app(settings)) as dask_client:
            body = _body(
                data_dir,
                input={"uri": f"file://{data_dir}/in-dask/"},
                output={"uri": f"file://{out}/"},
                outputs=["predictions", "probabilities"],
                keep_columns=["id"],
            )
            job = _submit(dask_client, body)
    assert job["status"] == "succeeded", job
    tables = [_read(out / f"part-0000{i}.parquet", "parquet") for i in range(3)]
    _check_answer(client, "iris-lda", X, ids, body["outputs"], tables)


def test_undecodable_escapes_are_a_422(client: TestClient, data_dir: Path) -> None:
    body = _body(data_dir, output={"uri": f"file://{data_dir}/out-%ff/"})
    response = client.post("/batch-predictions", json=body)
    assert response.status_code == 422 and response.json()["details"][0]["field"] == "output.uri"
