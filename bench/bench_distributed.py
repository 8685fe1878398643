"""Training by reference and batch scoring at scale on a 2-worker Dask ``LocalCluster`` (issue 25).

Synthetic Parquet shards (``--rows`` rows × 20 features, ``SHARD_ROWS`` rows a file, row groups
of ``GROUP_ROWS``: one partition each) are written once per size under ``--data-dir`` (reruns
reuse them) and, for ``--sources s3``, uploaded to a moto S3 server on loopback (the test suite's
``ThreadedMotoServer``; fake ``AWS_*`` credentials in the environment, ``BSVM_S3_ENDPOINT_URL``).
A real ``python -m service`` (``bench.server``) runs with ``BSVM_DASK_SCHEDULER`` at the
LocalCluster's scheduler and ``BSVM_DATA_URLS`` allowing the folder and the bucket. Run::

    .venv/bin/python -m bench.bench_distributed [--rows 1e6 3e6 1e7] \\
        [--models linear_svm em_svm lda] [--sources local s3] [--data-dir DIR] [--quick]

For each size, source and model:

- **by reference**: ``POST /train`` with ``data`` (``preprocess: none``), timed from the request
  to the job's ``succeeded`` (the model stored), ``/jobs/{id}`` polled every 50 ms. Peak RSS
  (``VmHWM``, reset before each job) of the API server, of the job's driver (the training process
  the Dask worker starts: the largest descendant of a worker) and of each Dask worker.
- **in memory**: the same rows read into one array in a fresh process, and the core estimator's
  ``fit`` timed there, with that process's peak RSS (rows included). The stored model is compared
  with it: the primal objective on every row (``primal_objective`` for ``linear_svm``, the EM
  objective ``residual_objective`` for ``em_svm``; their relative difference) and the largest
  coefficient difference. Ratio = by reference / in memory.
- **dask-ml** (the anchor, local files only): ``LogisticRegression(solver="admm")`` on the same
  Parquet files read by ``dask.dataframe`` on the same cluster, timed from the read to the fitted
  model. Its loss is the logistic loss, not the hinge: only the time compares.
- **batch scoring**: ``POST /batch-predictions`` of every row with the ``linear_svm`` model to
  one output file per input file (the same source kind), timed to ``_SUCCESS``, in rows/s.

The issue's goals are printed next to the figures, never asserted. The load average (the machine
is shared) is printed on every row. ``--quick`` is a 100k-row smoke run (smaller shards).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.distributed_cluster import PeakWatch, local_cluster
from bench.distributed_data import (
    BUCKET,
    FEATURES,
    GROUP_ROWS,
    N_FEATURES,
    QUICK_GROUP_ROWS,
    QUICK_SHARD_ROWS,
    SHARD_ROWS,
    TARGET,
    ensure_shards,
    moto_s3,
    read_rows,
    s3_client,
    shard_files,
    upload,
)
from bench.distributed_report import Row, markdown, report
from bench.server import peak_rss_mb, reset_peak_rss, start_server, stop_server

MODELS = ("linear_svm", "em_svm", "lda")
PARAMS: dict[str, dict[str, Any]] = {"linear_svm": {"C": 1.0}, "em_svm": {}, "lda": {}}
OBJECTIVE_RTOL = 1e-8
"""The tolerance of ``tests/core/test_partitioned_fits_dask.py``: the same optimum as in memory."""
COEF_ATOL = 1e-6
POLL_S = 0.05
JOB_TIMEOUT_S = 1800.0


def run_job(http: httpx.Client, path: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """POST a job, poll ``/jobs/{id}`` until it ends; (seconds from the request, last view)."""
    start = time.perf_counter()
    answer = http.post(path, json=body)
    if answer.status_code != 202:
        raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text[:500]}")
    job_id = answer.json()["job_id"]
    while True:
        job = http.get(f"/jobs/{job_id}").json()
        if job["status"] not in ("queued", "running"):
            return time.perf_counter() - start, job
        if time.perf_counter() - start > JOB_TIMEOUT_S:
            http.delete(f"/jobs/{job_id}")
            raise RuntimeError(f"job {job_id} still {job['status']} after {JOB_TIMEOUT_S} s")
        time.sleep(POLL_S)


def load_model(server_dir: Path, model_id: str) -> Any:
    """The stored estimator, read (and its signature checked) as the server reads it."""
    from service.repository.database import Database
    from service.repository.store import ModelStore
    from service.settings import Settings

    settings = Settings(data_dir=server_dir, log_level="warning")
    return ModelStore(settings, Database(settings.registry_url)).load(model_id)


# -- the in-memory reference, in a process of its own ---------------------------------------------
def em_objective(model: Any, X: np.ndarray, y01: np.ndarray) -> float:
    """The EM mode's objective d_α(β, 2^{1/α} ν) on every row (binary), from the original-scale
    decision values: Σ max(1 − y f(x), 0) + ν^{-α} Σ|β_j|^α / 2 (``bayes_em.residual_objective``)."""
    from bsvm_core.solvers.bayes_em import residual_objective

    y_pm = np.where(y01 == model.classes_[1], 1.0, -1.0)
    r = 1.0 - y_pm * np.ravel(model.decision_function(X))
    beta = np.ravel(model.beta_std_)
    penalised = np.ones(beta.size, dtype=bool)
    penalised[0] = not model.fit_intercept
    return residual_objective(r, beta, float(model.alpha), float(model.nu_), penalised)


def objective(model: Any, X: np.ndarray, y01: np.ndarray) -> float | None:
    """The model's primal objective on every row (None for LDA, which has none)."""
    from bsvm_core.solvers.linear_objective import primal_objective

    if hasattr(model, "beta_std_"):
        return em_objective(model, X, y01)
    if hasattr(model, "binary_models_") and hasattr(model, "C"):
        y_pm = np.where(y01 == model.classes_[1], 1.0, -1.0)
        return primal_objective(X, y_pm, model.coef_[0], float(model.intercept_[0]), model.C)
    return None


def reference_fits(folder: str, jobs: list[tuple[str, dict[str, Any], Any]]) -> list[dict]:
    """In a fresh process: read every row, fit each ``(model_type, params, stored model)``'s core
    estimator in memory, and compare; the process's peak RSS after each fit."""
    from service.model_types import model_types

    out = []
    load_start = time.perf_counter()
    X, y = read_rows(Path(folder))
    load_s = time.perf_counter() - load_start
    specs = model_types()
    for model_type, params, stored in jobs:
        estimator = specs[model_type].estimator_class(**params)
        start = time.perf_counter()
        estimator.fit(X, y)
        fit_s = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ours, ref = objective(stored, X, y), objective(estimator, X, y)
        coef = np.max(np.abs(np.asarray(stored.coef_) - np.asarray(estimator.coef_)))
        icpt = np.max(np.abs(np.asarray(stored.intercept_) - np.asarray(estimator.intercept_)))
        agree = float(np.mean(stored.predict(X[:200_000]) == estimator.predict(X[:200_000])))
        out.append(
            {
                "coef": np.asarray(estimator.coef_),
                "intercept": np.asarray(estimator.intercept_),
                "fit_s": fit_s,
                "load_s": load_s,
                "rss_mb": peak,
                "objective": ref,
                "objective_rel": None if ours is None else (ours - ref) / abs(ref),
                "coef_diff": float(max(coef, icpt)),
                "agree": agree,
            }
        )
    return out


def coef_distance(model: Any, reference: dict[str, Any]) -> float:
    """Largest |difference| of coefficients and intercepts from an in-memory fit's."""
    coef = np.max(np.abs(np.asarray(model.coef_) - reference["coef"]))
    return float(max(coef, np.max(np.abs(np.asarray(model.intercept_) - reference["intercept"]))))


def in_memory(folder: Path, jobs: list[tuple[str, dict[str, Any], Any]]) -> list[dict]:
    """``reference_fits`` in a spawned process (its RSS is its own, not the bench's)."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(reference_fits, str(folder), jobs).result()


# -- dask-ml ---------------------------------------------------------------------------------------
def dask_ml_fit(client: Any, folder: Path) -> float:
    """Seconds of ``LogisticRegression(solver="admm")`` on the folder's rows, read included."""
    import dask.dataframe as dd
    from dask_ml.linear_model import LogisticRegression

    start = time.perf_counter()
    frame = dd.read_parquet(str(folder / "part-*.parquet"), columns=[*FEATURES, TARGET])
    table = frame.to_dask_array(lengths=True).persist()
    X, y = table[:, :N_FEATURES], table[:, N_FEATURES].astype(np.int64)
    LogisticRegression(solver="admm").fit(X, y)
    seconds = time.perf_counter() - start
    del table, X, y
    return seconds


# -- the run ---------------------------------------------------------------------------------------


def train_rows(
    http: httpx.Client,
    watch: PeakWatch,
    server_dir: Path,
    folder: Path,
    uri: str,
    n_rows: int,
    source: str,
    models: Sequence[str],
    references: dict[tuple[int, str], dict[str, Any]],
) -> tuple[list[Row], dict[str, str]]:
    """Every model trained by reference from ``uri`` and compared with the same rows fitted in
    memory (fitted for the first source of a size, kept in ``references`` for the others)."""
    rows, stored, model_ids = [], [], {}
    for model_type in models:
        body = {
            "model_type": model_type,
            "name": f"bench-{model_type}-{n_rows}-{source}",
            "params": PARAMS[model_type],
            "preprocess": "none",
            "data": {"uri": uri, "format": "parquet", "target": TARGET, "features": FEATURES},
        }
        watch.start()
        seconds, job = run_job(http, "/train", body)
        rss = watch.stop()
        row = Row(n_rows, source, f"{model_type} by reference", rss=rss)
        rows.append(row)
        if job["status"] != "succeeded":
            row.note = f"FAILED after {seconds:.1f} s: {json.dumps(job.get('error'))[:300]}"
            sys.stderr.write(f"[bench] {row.note}\n")
            continue
        row.seconds = seconds
        model_ids[model_type] = job["model_id"]
        record = http.get(f"/models/{job['model_id']}").json()
        training = record["training"]
        row.data = {"params": record["params"], "model_type": model_type}
        row.note = (
            f"fit {training['seconds']:.2f} s in the driver, {training['partitions']} partitions, "
            f"{training.get('passes') or '–'} passes"
        )
        stored.append((row, model_type, record["params"], load_model(server_dir, job["model_id"])))
        sys.stderr.write(f"[bench] {n_rows} {source} {model_type}: {seconds:.2f} s\n")
    todo = [(m, p, model) for _, m, p, model in stored if (n_rows, m) not in references]
    if todo:
        results = in_memory(folder, todo)
        references.update({(n_rows, m): r for (m, *_), r in zip(todo, results, strict=True)})
        fresh = {m for m, *_ in todo}
    else:
        fresh = set()
    for row, model_type, _, model in stored:
        result = references[(n_rows, model_type)]
        row.reference_s, row.reference_rss = result["fit_s"], result["rss_mb"]
        if model_type in fresh:
            rel, coef_diff = result["objective_rel"], result["coef_diff"]
            extra = (
                f", labels agree {100 * result['agree']:.2f}%; reading the rows "
                f"{result['load_s']:.1f} s"
            )
        else:  # the same rows from another source: this model's coefficients against the fit's
            rel, coef_diff, extra = None, coef_distance(model, result), " (objective: see local)"
        ok = (rel is None or abs(rel) <= OBJECTIVE_RTOL) and coef_diff <= COEF_ATOL
        row.data.update(result, coef_diff=coef_diff, objective_rel=rel, within_tolerance=ok)
        obj = "–" if rel is None else f"{rel:.1e}"
        row.note += (
            f"; vs in-memory fit: objective rel diff {obj}, max abs Δcoef {coef_diff:.1e} "
            f"({'within' if ok else 'OUTSIDE'} rtol {OBJECTIVE_RTOL:g} / atol {COEF_ATOL:g})"
            + extra
        )
    return rows, model_ids


def batch_row(
    http: httpx.Client,
    watch: PeakWatch,
    model_id: str,
    uri: str,
    out_uri: str,
    n_rows: int,
    source: str,
) -> Row:
    """Every row scored to ``out_uri`` by ``POST /batch-predictions``."""
    body = {
        "model": model_id,
        "input": {"uri": uri, "format": "parquet"},
        "output": {"uri": out_uri, "format": "parquet"},
        "outputs": ["predictions"],
    }
    watch.start()
    seconds, job = run_job(http, "/batch-predictions", body)
    row = Row(n_rows, source, "batch scoring (linear_svm)", rss=watch.stop())
    if job["status"] != "succeeded":
        row.note = f"FAILED after {seconds:.1f} s: {json.dumps(job.get('error'))[:300]}"
        return row
    row.seconds = seconds
    written = job["result"]["rows"]
    row.data = {"rows_per_s": written / seconds}
    row.note = f"{written / seconds:,.0f} rows/s, {len(job['result']['files'])} files written"
    sys.stderr.write(f"[bench] {n_rows} {source} batch: {seconds:.2f} s\n")
    return row


def run(args: argparse.Namespace) -> list[Row]:
    """Generate (or reuse) the shards, start S3, the cluster and the server; measure every size."""
    shard_rows, group_rows = (
        (QUICK_SHARD_ROWS, QUICK_GROUP_ROWS) if args.quick else (SHARD_ROWS, GROUP_ROWS)
    )
    data_root = Path(args.data_dir).resolve()
    data_root.mkdir(parents=True, exist_ok=True)
    folders = {n: ensure_shards(data_root, n, shard_rows, group_rows) for n in args.rows}
    out_root = Path(tempfile.mkdtemp(prefix="out-", dir=data_root))
    server_dir = Path(tempfile.mkdtemp(prefix="bsvm-bench-distributed-server-"))
    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(moto_s3()) if "s3" in args.sources else None
        cluster, client = stack.enter_context(local_cluster())
        worker_pids = list(client.run(os.getpid).values())
        settings = {
            "data_urls": f"file://{data_root}/,s3://{BUCKET}/",
            "dask_scheduler": cluster.scheduler_address,
            "train_timeout_s": str(JOB_TIMEOUT_S),
        }
        if endpoint:
            settings["s3_endpoint_url"] = endpoint
        process, url = start_server(server_dir, **settings)
        stack.callback(stop_server, process)
        http = stack.enter_context(httpx.Client(base_url=url, timeout=60))
        watch = PeakWatch(process.pid, worker_pids)
        references: dict[tuple[int, str], dict[str, Any]] = {}
        warm_up(http, client, folders[min(args.rows)])
        for n_rows in args.rows:
            folder = folders[n_rows]
            for source in args.sources:
                if source == "s3":
                    assert endpoint is not None
                    uri, out_uri = upload(endpoint, folder), f"s3://{BUCKET}/out-{n_rows}/"
                else:
                    uri, out_uri = f"file://{folder}/", f"file://{out_root}/out-{n_rows}/"
                trained, ids = train_rows(
                    http, watch, server_dir, folder, uri, n_rows, source, args.models,
                    references,
                )  # fmt: skip
                rows.extend(trained)
                if "linear_svm" in ids:
                    rows.append(
                        batch_row(http, watch, ids["linear_svm"], uri, out_uri, n_rows, source)
                    )
                progress(rows)
                if source == "s3":
                    remove_prefix(endpoint, f"{folder.name}/")
                    remove_prefix(endpoint, f"out-{n_rows}/")
            if args.dask_ml:
                for pid in worker_pids:
                    reset_peak_rss(pid)
                seconds = dask_ml_fit(client, folder)
                rss = {"workers": [peak_rss_mb(pid) for pid in worker_pids]}
                reference = next(
                    (r.seconds for r in rows if r.rows == n_rows and r.what == "linear_svm by reference" and r.source == "local"),
                    None,
                )  # fmt: skip
                row = Row(n_rows, "local", 'dask-ml LogisticRegression(solver="admm")', seconds)
                row.rss, row.reference_s = rss, reference
                row.note = (
                    "anchor: logistic loss, not the hinge (only the time compares); read by "
                    "dask.dataframe, timed from the read; reference = our linear_svm by reference"
                )
                rows.append(row)
        shutil.rmtree(out_root, ignore_errors=True)
    shutil.rmtree(server_dir, ignore_errors=True)
    return rows


def _service_file() -> str:
    import service

    return str(service.__file__)


def warm_up(http: httpx.Client, client: Any, folder: Path) -> None:
    """One small training first (the workers' training forkservers start, the clients connect),
    so that every measured job finds the cluster warm; its time goes to stderr. Checks that the
    workers import this checkout's ``service``."""
    here = _service_file()
    there = set(client.run(_service_file).values())
    if there != {here}:
        raise RuntimeError(f"the Dask workers import {there}, not {here}")
    body = {
        "model_type": "lda",
        "name": "bench-warm-up",
        "data": {"uri": f"file://{shard_files(folder)[0]}", "format": "parquet", "target": TARGET},
    }
    seconds, job = run_job(http, "/train", body)
    sys.stderr.write(f"[bench] warm-up training (first job): {seconds:.2f} s, {job['status']}\n")


def progress(rows: list[Row]) -> None:
    """The rows measured so far, on stderr (an interrupted run keeps them)."""
    sys.stderr.write(markdown(rows) + "\n")


def remove_prefix(endpoint: str | None, prefix: str) -> None:
    """Delete the bench's objects under ``prefix`` (moto holds them in this process)."""
    if endpoint is None:
        return
    client = s3_client(endpoint)
    listing = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    for item in listing.get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=item["Key"])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.bench_distributed", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rows", nargs="+", type=float, default=[1e6, 3e6, 1e7])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--sources", nargs="+", choices=("local", "s3"), default=["local", "s3"])
    parser.add_argument(
        "--data-dir",
        default=str(Path(tempfile.gettempdir()) / "bsvm-bench-distributed"),
        help="cache of the generated shards (reused by later runs)",
    )
    parser.add_argument("--quick", action="store_true", help="100k rows, small shards: a smoke run")
    parser.add_argument(
        "--no-dask-ml", dest="dask_ml", action="store_false", help="skip the dask-ml anchor"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rows = [1e5]
    args.rows = [int(n) for n in args.rows]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print the table, then the goals."""
    args = parse_args(argv)
    sys.stdout.write(
        f"Shards under {Path(args.data_dir).resolve()}; 2 Dask workers × 1 thread; "
        f"load average at start {' '.join(f'{v:.2f}' for v in os.getloadavg())}\n\n"
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the cluster and the server
    sys.stdout.write(report(run(args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
