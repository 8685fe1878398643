"""``POST /train`` with ``data`` (rows by reference): every check before the job, then its task.

Checked in the request, from the files' metadata only (Parquet footers, CSV headers; the target
column alone where a count of classes or CSV rows is needed), each failure a 422 naming the field:
the location against ``BSVM_DATA_URLS`` (``data.uri``), files matching and readable (``data.uri``),
the target column and its labels (``data.target``: present, integer or string, two classes at
least), the features (``data.features[i]``: present, numeric, not the target), and the row limit of
the estimators fitted in one process (``BSVM_MAX_ROWS``).

Estimators with ``fit_partitions`` stream the partitions (or use Dask's); the others load every
row into the worker (at most ``BSVM_MAX_ROWS``). ``evaluation.test_fraction`` holds out a
stratified split of the rows for the latter and whole partitions for the former;
``evaluation.cv`` and ``search`` are not supported by reference (422).
"""

from __future__ import annotations

import secrets
from typing import Any

from service.data.loading import loaders
from service.data.locations import check_location
from service.data.sources import Column, DataSource, describe, scan_labels
from service.errors import InvalidInput, detail
from service.model_types import ModelSpec, ModelTypes
from service.settings import Settings
from service.training.tasks import TrainTask, _check_memory, _check_params, _preprocess

LISTED_FILES = 100
"""Files named in the stored record's ``data.files`` (the count is always there)."""


def streams(spec: ModelSpec, params: dict[str, Any]) -> bool:
    """True when the type's estimator fits by partitions (``fit_partitions``), never holding all
    rows."""
    estimator = spec.make_estimator(params)
    return spec.by_partitions and callable(getattr(estimator, "fit_partitions", None))


def scaling_types(types: ModelTypes) -> list[str]:
    """The model types that fit by partitions with their default params."""
    return [name for name, spec in types.items() if streams(spec, spec.params_model().model_dump())]


def _refuse_unsupported(request: Any) -> None:
    """422 for the fields that do not combine with data by reference."""
    for name in ("X", "y", "feature_names"):
        if getattr(request, name) is not None:
            problem = (
                "names come from the columns: use data.features"
                if name == "feature_names"
                else "send either X and y, or data"
            )
            raise InvalidInput("rows sent twice", [detail(name, problem)])
    if request.evaluation is not None and request.evaluation.cv is not None:
        raise InvalidInput(
            "not supported by reference",
            [detail("evaluation.cv", "cross-validation is not supported by reference; use "
                    "test_fraction")],
        )  # fmt: skip
    if request.search is not None:
        raise InvalidInput(
            "not supported by reference",
            [detail("search", "a parameter search is not supported by reference")],
        )


def _column(columns: dict[str, Column], name: str, field_name: str, source: DataSource) -> Column:
    if name not in columns:
        raise InvalidInput(
            "no such column",
            [detail(field_name, f"no column {name!r} in {source.uri.url}; columns: "
                    f"{', '.join(list(columns)[:50])}")],
        )  # fmt: skip
    return columns[name]


def check_columns(source: DataSource, target: str, features: list[str] | None) -> list[str]:
    """The feature names (given or every column but the target), each present and numeric."""
    columns = {c.name: c for c in source.columns}
    label = _column(columns, target, "data.target", source)
    if not (label.numeric or label.type in ("string", "large_string")):
        raise InvalidInput(
            "labels must be integers or strings",
            [detail("data.target", f"column {target!r} is {label.type}")],
        )
    if features is None:
        chosen = [c.name for c in source.columns if c.name != target]
        for name in chosen:
            if not columns[name].numeric:
                raise InvalidInput(
                    "a feature is not numeric",
                    [detail("data.features", f"column {name!r} is {columns[name].type}, not a "
                            "number; list the features to leave it out")],
                )  # fmt: skip
        if not chosen:
            raise InvalidInput("no features", [detail("data.features", "no column but target")])
        return chosen
    seen: set[str] = set()
    for i, name in enumerate(features):
        field_name = f"data.features[{i}]"
        column = _column(columns, name, field_name, source)
        if name == target:
            raise InvalidInput("target as feature", [detail(field_name, "is the target column")])
        if name in seen:
            raise InvalidInput("repeated feature", [detail(field_name, f"{name!r} is repeated")])
        seen.add(name)
        if not column.numeric:
            raise InvalidInput(
                "a feature is not numeric",
                [detail(field_name, f"column {name!r} is {column.type}, not a number")],
            )
    return list(features)


def prepare_reference_task(request: Any, settings: Settings, types: ModelTypes) -> TrainTask:
    """The checked ``TrainTask`` of a request with ``data`` (422 naming the field otherwise)."""
    _refuse_unsupported(request)
    spec = types[request.model_type]
    params = request.params.model_dump()
    _check_params(params, None, settings)
    preprocess = _preprocess(spec, getattr(request, "preprocess", None))
    ref = request.data
    uri = check_location(ref.uri, settings, "data.uri")
    source = describe(uri, ref.format, settings, "data.uri")
    features = check_columns(source, ref.target, ref.features)
    if len(features) > settings.max_features:
        raise InvalidInput(
            "too many features",
            [detail("data.features", f"{len(features)} features; the limit is "
                    f"{settings.max_features}")],
        )  # fmt: skip
    source, n_classes = scan_labels(source, ref.target, settings.max_classes, "data.target")
    if n_classes is None:
        raise InvalidInput(
            "too many classes",
            [detail("data.target", f"more than {settings.max_classes} classes (BSVM_MAX_CLASSES)")],
        )
    if n_classes < 2:
        raise InvalidInput(
            "one class only", [detail("data.target", f"column {ref.target!r} holds one class")]
        )
    by_partitions = streams(spec, params)
    if by_partitions and params.get("solver") not in (None, "auto"):
        raise InvalidInput(
            "not supported by reference",
            [detail("params.solver", "by reference the exact solver runs (auto); the "
                    f"{params['solver']} solver needs every row in memory")],
        )  # fmt: skip
    n_rows = source.n_rows
    if not by_partitions and n_rows is not None and n_rows > settings.max_rows:
        scaling = ", ".join(scaling_types(types)) or "none on this server"
        raise InvalidInput(
            "too many rows for this model type",
            [detail("data.uri", f"{n_rows} rows; {spec.model_type} loads every row into one "
                    f"worker, at most {settings.max_rows} (BSVM_MAX_ROWS); the model types that "
                    f"scale: {scaling}")],
        )  # fmt: skip
    _check_memory(spec, params, (n_rows or 1, len(features)), n_classes, settings)
    parts = loaders(source, features, ref.target)
    seed = params.get("random_state")
    if "random_state" in params and seed is None:
        seed = params["random_state"] = secrets.randbelow(2**31)
    evaluation = None
    if request.evaluation is not None:
        split_seed = request.evaluation.random_state
        if split_seed is None:
            split_seed = seed if seed is not None else secrets.randbelow(2**31)
        fraction = request.evaluation.test_fraction or 0.25
        if by_partitions and len(parts) < 2:
            raise InvalidInput(
                "cannot hold out partitions",
                [detail("evaluation.test_fraction", "by reference, whole partitions (files or "
                        "row groups) are held out; the data has only one")],
            )  # fmt: skip
        evaluation = {"test_fraction": fraction, "random_state": split_seed}
    files = [source.url(f.path) for f in source.files]
    data = {
        "uri": uri.url,
        "format": source.format,
        "target": ref.target,
        "features": features,
        "n_rows": n_rows,
        "by_partitions": by_partitions,
        "evaluation": evaluation,
        "parts": [
            {"scheme": p.scheme, "path": p.path, "format": p.format, "row_group": p.row_group,
             "rows": p.rows, "options": p.options}
            for p in parts
        ],
    }  # fmt: skip
    task = TrainTask(
        spec=spec, params=params, X=None, y=None, memory_limit_mb=settings.worker_memory_mb
    )
    task.data = data
    task.meta = {
        "name": request.name or request.model_type,
        "feature_names": features,
        "target": ref.target,
        "random_state": seed,
        "evaluation": evaluation,
        "tags": dict(request.tags or {}),
        "description": request.description,
        "replace_schema": bool(request.replace_schema),
        "preprocess": preprocess,
        "data": {
            "uri": uri.url,
            "format": source.format,
            "target": ref.target,
            "files": files[:LISTED_FILES],
            "n_files": len(files),
            "rows": n_rows,
        },
    }
    return task
