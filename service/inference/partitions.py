"""One input partition (file) scored into one output file: the task of a batch scoring.

``score_partition`` is module-level and its arguments picklable, so it runs the same in the
service's thread or as a Dask task on the worker that reads the file. Each block of rows read
(``data.batches``) becomes one float64 matrix in the model's feature order, is scored by the
service's one scoring core (``predict.score_arrays``: the model's methods on the whole block) and
written as one table: the ``keep`` columns as they were read, then the answer's columns named as
in ``text/csv`` answers (``schemas.outputs.column_names``). No per-row Python.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from service.data.batches import BATCH_ROWS, BatchFileWriter, read_batches
from service.data.sources import open_filesystem
from service.errors import ApiError, InvalidInput, TrainingCancelled, TrainingFailed, detail
from service.inference.predict import score_arrays
from service.schemas.outputs import INTERVAL_COLUMNS, POINT_OUTPUTS, column_names


@dataclass(frozen=True)
class PartitionTask:
    """Where one partition comes from and goes to, and what to compute (all picklable)."""

    scheme: str
    options: dict[str, Any]
    source: str
    """The input file's fsspec path (on the ``scheme`` filesystem)."""
    source_format: str
    target: str
    """The staged output file's fsspec path."""
    target_format: str
    features: tuple[str, ...]
    keep: tuple[str, ...]
    outputs: tuple[str, ...]
    """Short names (``label``, ``decision``, ``probability``, ``interval``)."""
    level: float
    classes: tuple[Any, ...]
    interval_columns: tuple[Any, ...]
    """What names the interval columns (``plots.problems.interval_columns``)."""
    budget_bytes: float
    target_scheme: str
    """The output's filesystem (``file``, ``s3``): inputs and outputs may live on different ones."""
    target_options: dict[str, Any]
    batch_rows: int = BATCH_ROWS


def feature_matrix(batch: pa.RecordBatch, features: Sequence[str], where: str) -> np.ndarray:
    """The ``features`` columns of ``batch`` as a float64 matrix (column-major: each column is
    one contiguous copy); 422 on a missing or non-finite value (naming the file ``where`` and
    the column)."""
    X = np.empty((batch.num_rows, len(features)), dtype=np.float64, order="F")
    for j, name in enumerate(features):
        X[:, j] = batch.column(name).to_numpy(zero_copy_only=False)
    finite = np.isfinite(X).all(axis=0)
    if not finite.all():
        name = features[int(np.argmin(finite))]
        raise InvalidInput(
            "the data holds missing or non-finite values",
            [detail("input.uri", f"{where}: column {name!r} has empty, NaN or inf values")],
        )
    return X


def _arrow(values: np.ndarray, labels: bool) -> pa.Array:
    if labels and values.dtype == object:
        return pa.array(values.tolist())
    return pa.array(values)


def answer_columns(
    scores: dict[str, Any], classes: Sequence[Any], intervals: Sequence[Any] | None = None
) -> tuple[list[str], list[pa.Array]]:
    """The answer's columns, in the order and with the names of a ``text/csv`` answer
    (``intervals``: what names the interval columns, default the classes)."""
    names: list[str] = []
    arrays: list[pa.Array] = []

    def add(
        values: np.ndarray, prefix: str, labels: bool = False, by: Sequence[Any] = classes
    ) -> None:
        values = np.asarray(values)
        per_class = values.ndim == 2
        names.extend(column_names(prefix, by, per_class))
        if per_class:
            arrays.extend(
                _arrow(np.ascontiguousarray(values[:, k]), labels) for k in range(values.shape[1])
            )
        else:
            arrays.append(_arrow(values, labels))

    for spec in POINT_OUTPUTS:
        if spec.short in scores:
            add(scores[spec.short], spec.short, spec.labels)
    if "interval" in scores:
        for bound, prefix in zip(scores["interval"], INTERVAL_COLUMNS, strict=True):
            add(bound, prefix, by=classes if intervals is None else intervals)
    return names, arrays


def _cancel_check(stop: Callable[[], bool] | None) -> None:
    if stop is not None and stop():
        raise TrainingCancelled("the batch scoring was cancelled")


def _open_source(fs: Any, path: str, where: str) -> Any:
    """The input file open for reading; a deleted or unreadable one fails the job naming it."""
    try:
        return fs.open(path, "rb")
    except FileNotFoundError:
        problem = f"data object {where} no longer exists"
    except OSError as exc:
        problem = f"cannot read data object {where}: {exc}"[:500]
    raise TrainingFailed(problem, [detail("input.uri", problem)])


def score_partition(
    estimator: Any, task: PartitionTask, stop: Callable[[], bool] | None = None
) -> int:
    """Score every row of ``task.source`` into ``task.target``, block by block; the row count.

    ``stop`` is asked between blocks; once it says so, ``TrainingCancelled`` is raised.
    """
    fs = open_filesystem(task.scheme, task.options)
    out_fs = open_filesystem(task.target_scheme, task.target_options)
    where = f"{task.scheme}://{task.source}"
    columns = list(dict.fromkeys([*task.features, *task.keep]))
    outputs = set(task.outputs)
    _cancel_check(stop)  # a task started after a cancel writes nothing
    out_fs.makedirs(posixpath.dirname(task.target), exist_ok=True)
    rows = 0
    with _open_source(fs, task.source, where) as src, out_fs.open(task.target, "wb") as dst:
        writer = BatchFileWriter(dst, task.target_format)
        schema_of_keep: pa.Schema | None = None
        for batch in read_batches(src, task.source_format, columns, task.features, task.batch_rows):
            _cancel_check(stop)
            X = feature_matrix(batch, task.features, where)
            scores = score_arrays(estimator, X, outputs, task.level, task.budget_bytes)
            names, arrays = answer_columns(scores, task.classes, task.interval_columns)
            kept = [batch.column(name) for name in task.keep]
            writer.write(pa.table(kept + arrays, names=[*task.keep, *names]))
            schema_of_keep = batch.schema
            rows += batch.num_rows
        writer.close(None if rows else _empty_answer(task, schema_of_keep))
    return rows


def _empty_answer(task: PartitionTask, schema: pa.Schema | None) -> pa.Table:
    """A table of no rows with the answer's columns (floats; labels typed as the classes)."""
    label_type = pa.string() if any(isinstance(c, str) for c in task.classes) else pa.int64()
    fields = [pa.field(name, pa.string()) for name in task.keep]
    if schema is not None:
        fields = [schema.field(name) for name in task.keep]
    for spec in POINT_OUTPUTS:
        if spec.short in task.outputs:
            two_d = spec.short == "probability" or (
                spec.short == "decision" and len(task.classes) > 2
            )
            for name in column_names(spec.short, task.classes, two_d):
                fields.append(pa.field(name, label_type if spec.labels else pa.float64()))
    if "interval" in task.outputs:
        for prefix in INTERVAL_COLUMNS:
            for name in column_names(prefix, task.interval_columns, len(task.classes) > 2):
                fields.append(pa.field(name, pa.float64()))
    return pa.schema(fields).empty_table()


def run_partition(estimator: Any, task: PartitionTask, stop_event: str | None = None) -> dict:
    """``score_partition`` as a Dask task: ``{"rows": n}`` or ``{"error": {...}}`` (an
    ``ApiError`` as plain data, so it crosses the wire whole). ``stop_event`` names the
    ``distributed.Event`` that cancels it."""
    stop = None
    if stop_event is not None:
        from distributed import Event

        event = Event(stop_event)
        stop = event.is_set
    try:
        return {"rows": score_partition(estimator, task, stop)}
    except ApiError as exc:
        return {
            "error": {
                "code": exc.code,
                "message": exc.message,
                "details": [d.model_dump() for d in exc.details],
            }
        }
