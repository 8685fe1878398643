"""Batch scoring: files by reference scored into files, as a job of kind ``batch_predict``.

``plan_batch`` does every check that needs no scoring, so a bad request gets its 4xx before a
job exists: both URIs against ``BSVM_DATA_URLS`` (``data.locations``), the model reference
(404) and its outputs (409), the input files and their columns from footers and headers
(``data.sources``: missing feature columns or ``keep_columns`` are a 422 naming them), and the
output prefix (409 when it holds an output). The plan is the job's task (JSON, no pickle).

``run_batch`` runs it: one ``partitions.score_partition`` per input file, staged under the
output prefix and committed write-once (``data.writing``: moves, then ``_SUCCESS`` last). The
partitions run one after another in the job's thread, or, with ``BSVM_DASK_SCHEDULER``, as one
Dask task each (the model is scattered once; each task reads, scores and writes its file where
it runs). Progress is the share of partitions written; a cancel stops between blocks and leaves
nothing at the output prefix, and so does the time limit (``BSVM_BATCH_TIMEOUT_S``), which ends
the job ``failed`` with ``TRAINING_TIMEOUT``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from service.data.locations import DataUri, check_location, storage_options
from service.data.sources import describe
from service.data.writing import OutputFolder, part_name
from service.errors import (
    ApiError,
    InvalidInput,
    TrainingCancelled,
    TrainingFailed,
    TrainingTimeout,
    detail,
)
from service.inference.predict import check_outputs
from service.plots.problems import interval_columns
from service.repository.store import ModelStore
from service.schemas.batch import BatchPredictRequest
from service.schemas.outputs import INTERVAL_COLUMNS, OUTPUTS, SHORT_NAMES, column_names
from service.settings import Settings

if TYPE_CHECKING:  # pyarrow (the ``data`` extra) is imported when a batch job runs
    from service.inference.partitions import PartitionTask

logger = logging.getLogger("service.inference.batch_scoring")

KIND = "batch_predict"
POLL_S = 0.1


@dataclass
class BatchPlan:
    """A checked batch scoring: the job's task."""

    model_id: str
    model_type: str
    name: str
    input_scheme: str
    input_format: str
    files: list[str]
    output_scheme: str
    output_path: str
    output_format: str
    features: list[str]
    keep: list[str]
    outputs: list[str]
    level: float
    classes: list[Any]
    interval_columns: list[Any] | None = None
    """``plots.problems.interval_columns`` (None: the classes; plans queued before it existed)."""

    @property
    def output_url(self) -> str:
        """The output prefix as a URI: the job's ``target`` (one active job writes to it)."""
        return f"{self.output_scheme}://{self.output_path}"

    def to_bytes(self) -> bytes:
        """The plan as JSON bytes (the job's payload)."""
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> BatchPlan:
        """The plan ``to_bytes`` wrote."""
        return cls(**json.loads(data))


def _output_prefix(body: BatchPredictRequest, settings: Settings) -> DataUri:
    checked = check_location(body.output.uri, settings, "output.uri")
    if checked.is_glob:
        raise InvalidInput(
            "the output is a prefix", [detail("output.uri", "must be a prefix, not a glob")]
        )
    return checked if checked.is_prefix else DataUri(checked.scheme, checked.path + "/")


def _features(record: dict[str, Any], columns: list[str], keep: list[str]) -> list[str]:
    """The model's feature columns (its signature's names; a model without names takes every
    column but ``keep_columns``, in file order, and needs as many as it has features)."""
    names = record.get("feature_names")
    if names:
        return list(names)
    rest = [c for c in columns if c not in keep]
    if len(rest) != int(record["n_features"]):
        raise InvalidInput(
            "the input columns do not match the model",
            [
                detail(
                    "input.uri",
                    f"the model has {record['n_features']} unnamed features; the files have "
                    f"{len(rest)} columns besides keep_columns",
                )
            ],
        )
    return rest


def plan_batch(body: BatchPredictRequest, store: ModelStore, settings: Settings) -> BatchPlan:
    """Every check of a batch scoring that needs no scoring (module notes); the job's task."""
    source_uri = check_location(body.input.uri, settings, "input.uri")
    output = _output_prefix(body, settings)
    model_id = store.resolve(body.model, "model")
    record = store.model_record(model_id)
    outputs = [SHORT_NAMES.get(name, name) for name in body.outputs]
    ordered = [spec.short for spec in OUTPUTS if spec.short in outputs]
    check_outputs(store.load(model_id), record, model_id, set(ordered))
    source = describe(source_uri, body.input.format, settings, "input.uri")
    columns = {c.name: c for c in source.columns}
    features = _features(record, source.column_names(), body.keep_columns)
    missing = [name for name in features if name not in columns]
    if missing:
        raise InvalidInput(
            "the input lacks the model's feature columns",
            [detail("input.uri", f"missing feature columns {missing[:20]} ({len(missing)})")],
        )
    text = [name for name in features if not columns[name].numeric and body.input.format != "csv"]
    if text:
        raise InvalidInput(
            "feature columns must be numeric",
            [detail("input.uri", f"columns {text[:20]} are not numeric")],
        )
    unknown = [name for name in body.keep_columns if name not in columns]
    if unknown:
        raise InvalidInput(
            "keep_columns not in the input", [detail("keep_columns", f"no columns {unknown}")]
        )
    if len(set(body.keep_columns)) != len(body.keep_columns):
        raise InvalidInput("duplicate keep_columns", [detail("keep_columns", "must be distinct")])
    answer = {
        name
        for short in ordered
        for name in _answer_names(
            short, interval_columns(record) if short == "interval" else record["classes"]
        )
    }
    clash = [name for name in body.keep_columns if name in answer]
    if clash:
        raise InvalidInput(
            "keep_columns clash with the answer",
            [detail("keep_columns", f"{clash} are names of answer columns")],
        )
    OutputFolder(output.scheme, output.path, storage_options(output.scheme, settings)).check_free()
    return BatchPlan(
        model_id=model_id,
        model_type=record["model_type"],
        name=record["name"],
        input_scheme=source_uri.scheme,
        input_format=body.input.format,
        files=[f.path for f in source.files],
        output_scheme=output.scheme,
        output_path=output.path,
        output_format=body.output.format,
        features=features,
        keep=list(body.keep_columns),
        outputs=ordered,
        level=body.level,
        classes=list(record["classes"]),
        interval_columns=interval_columns(record),
    )


def _answer_names(short: str, classes: list[Any]) -> list[str]:
    """Every column name output ``short`` may take (one column or one per class)."""
    prefixes = INTERVAL_COLUMNS if short == "interval" else (short,)
    return [
        name
        for p in prefixes
        for two_d in (False, True)
        for name in column_names(p, classes, two_d)
    ]


def _tasks(
    plan: BatchPlan, folder: OutputFolder, attempt: str, settings: Settings
) -> list[PartitionTask]:
    from service.inference.partitions import PartitionTask

    options = storage_options(plan.input_scheme, settings)
    staging = folder.staging(attempt)
    return [
        PartitionTask(
            scheme=plan.input_scheme,
            options=options,
            source=path,
            source_format=plan.input_format,
            target=staging + part_name(i, plan.output_format),
            target_format=plan.output_format,
            features=tuple(plan.features),
            keep=tuple(plan.keep),
            outputs=tuple(plan.outputs),
            level=plan.level,
            classes=tuple(plan.classes),
            interval_columns=tuple(plan.interval_columns or plan.classes),
            budget_bytes=settings.predict_memory_mb * 2**20,
            target_scheme=plan.output_scheme,
            target_options=storage_options(plan.output_scheme, settings),
        )
        for i, path in enumerate(plan.files)
    ]


class JobDeadline:
    """The job's stop flag: set once it is cancelled or its time limit has passed."""

    def __init__(self, cancelled: threading.Event, limit_s: float) -> None:
        self.cancelled = cancelled
        self.limit_s = limit_s
        self.at = time.monotonic() + limit_s

    @property
    def expired(self) -> bool:
        """The time limit has passed (whether or not the job was also cancelled)."""
        return time.monotonic() >= self.at

    def is_set(self) -> bool:
        return self.cancelled.is_set() or self.expired

    def error(self) -> TrainingTimeout:
        """The failed job's error: the limit and what to change."""
        return TrainingTimeout(
            f"the batch scoring exceeded the time limit of {self.limit_s:g} s "
            "(BSVM_BATCH_TIMEOUT_S); nothing was written",
            [
                detail(
                    "input.uri",
                    "scoring took too long: split the input into smaller batches, or raise "
                    "BSVM_BATCH_TIMEOUT_S",
                )
            ],
        )


def scoring_detail(done: int, total: int) -> dict[str, Any]:
    """The job's ``ProgressDetail``: input files scored and written, of all."""
    return {"stage": "scoring", "partitions_done": done, "partitions": total}


def _locally(
    estimator: Any,
    tasks: list[PartitionTask],
    stop: JobDeadline,
    on_progress: Callable[..., None],
) -> int:
    from service.inference.partitions import score_partition

    rows = 0
    for i, task in enumerate(tasks):
        rows += score_partition(estimator, task, stop.is_set)
        on_progress((i + 1) / len(tasks), scoring_detail(i + 1, len(tasks)))
    return rows


def _on_dask(
    address: str,
    estimator: Any,
    tasks: list[PartitionTask],
    stop: JobDeadline,
    on_progress: Callable[..., None],
) -> int:
    """One Dask task per partition; the model scattered once; cancel through a dask Event."""
    from distributed import Client, Event

    from service.inference.partitions import run_partition

    with Client(address, set_as_default=False, timeout=30) as client:
        name = f"bsvm-batch-{uuid.uuid4().hex}"
        halt = Event(name, client=client)
        model = client.scatter(estimator, broadcast=False, hash=False)
        futures = [
            client.submit(run_partition, model, task, name, key=f"{name}-{i}", pure=False)
            for i, task in enumerate(tasks)
        ]
        checked: set[str] = set()
        try:
            while True:
                done = [f for f in futures if f.done()]
                on_progress(len(done) / len(futures), scoring_detail(len(done), len(futures)))
                _raise_first_error([f for f in done if f.key not in checked])
                checked.update(f.key for f in done)
                if len(done) == len(futures):
                    break
                if stop.is_set():
                    raise TrainingCancelled("the batch scoring was cancelled")
                time.sleep(POLL_S)
            results = client.gather(futures)
        except BaseException:
            halt.set()  # running partitions stop at their next block, the others at once
            _settle(futures)
            client.cancel(futures)
            raise
        finally:
            halt.clear()
    rows = 0
    for result in results:
        if "error" in result:
            raise _error(result["error"])
        rows += int(result["rows"])
    return rows


def _raise_first_error(done: list[Any]) -> None:
    """Raise the error of the first of the partitions ``done`` that failed (an exception, or an
    ``ApiError`` returned as data by ``run_partition``), so the job ends without scoring the rest
    (their results are small: a row count or an error)."""
    for future in done:
        if future.status == "error":
            raise future.exception()
        if future.status == "finished":
            result = future.result()
            if "error" in result:
                raise _error(result["error"])


def _settle(futures: list[Any], timeout_s: float = 60.0) -> None:
    """Wait until every partition task has returned, so none writes after the staging folder is
    removed: a task cancelled while it runs goes on in its worker's thread, where it would stage
    its file after ``discard`` (on S3 the object is put when the file is closed). With the stop
    event set, running tasks end at their next block and pending ones as they start.

    (Polled: ``distributed.wait`` needs a default client, and the service's is not one.)"""
    deadline = time.monotonic() + timeout_s
    while not all(f.done() for f in futures):
        if time.monotonic() >= deadline:
            logger.warning("batch partitions did not settle within %g s", timeout_s)
            return
        time.sleep(POLL_S)


def _error(data: dict[str, Any]) -> ApiError:
    cls = {"INVALID_INPUT": InvalidInput, "TRAINING_CANCELLED": TrainingCancelled}.get(
        data["code"], TrainingFailed
    )
    return cls(data["message"], [detail(d["field"], d["problem"]) for d in data["details"]])


def run_batch(
    plan: BatchPlan,
    job_id: str,
    store: ModelStore,
    settings: Settings,
    cancelled: threading.Event,
    on_progress: Callable[..., None],
) -> dict[str, Any]:
    """Score every partition and commit the output write-once; the job's result (``BatchResult``)."""
    estimator = store.load(plan.model_id)
    folder = OutputFolder(
        plan.output_scheme, plan.output_path, storage_options(plan.output_scheme, settings)
    )
    attempt = f"{job_id}.{uuid.uuid4().hex[:8]}"
    tasks = _tasks(plan, folder, attempt, settings)
    stop = JobDeadline(cancelled, settings.batch_timeout_s)
    try:
        try:
            if settings.dask_scheduler:
                rows = _on_dask(settings.dask_scheduler, estimator, tasks, stop, on_progress)
            else:
                rows = _locally(estimator, tasks, stop, on_progress)
            if cancelled.is_set():  # every file scored: a limit passed just now loses nothing
                raise TrainingCancelled("the batch scoring was cancelled")
        except TrainingCancelled:
            if stop.expired and not cancelled.is_set():
                raise stop.error() from None
            raise
        names = [part_name(i, plan.output_format) for i in range(len(tasks))]
        manifest = {
            "job_id": job_id,
            "model_id": plan.model_id,
            "format": plan.output_format,
            "files": names,
            "rows": rows,
        }
        files = folder.commit(attempt, names, manifest)
    finally:
        folder.discard(attempt)
    return {"output_uri": folder.url, "files": files, "rows": rows, "model_id": plan.model_id}


def batch_runner(
    store: ModelStore, settings: Settings
) -> Callable[[str, bytes, threading.Event, Callable[..., None]], dict[str, Any]]:
    """The job queue's runner of ``batch_predict`` jobs."""

    def run(
        job_id: str, data: bytes, cancelled: threading.Event, on_progress: Callable[..., None]
    ) -> dict[str, Any]:
        return run_batch(
            BatchPlan.from_bytes(data), job_id, store, settings, cancelled, on_progress
        )

    return run
