"""MLflow's and KServe V1's scoring bodies as rows, and their answer ``{"predictions": [...]}``.

Pure functions; every failure is a 422 (``InvalidInput``) naming the field as the sender wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from service.inference.query import PredictQuery
from service.wire.answer import Answer
from service.wire.rows import Rows, invalid, matrix, number, query_of, rows_list


def records(items: Any, field: str) -> tuple[list[str], list[list[float]]]:
    """``[{column: value}, ...]`` as column names (the first record's order) and rows."""
    items = rows_list(items, field, "objects {column: value}")
    names: list[str] = []
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise invalid(f"{field}[{i}]", "must be an object {column: value}")
        if i == 0:
            names = list(item)
            if not names:
                raise invalid(f"{field}[0]", "must hold at least one column")
        elif set(item) != set(names):
            differ = sorted(set(item) ^ set(names))[:10]
            raise invalid(f"{field}[{i}]", f"columns differ from record 0's: {differ}")
        out.append([number(item[name], f"{field}[{i}].{name}") for name in names])
    return names, out


def columns(mapping: Mapping[str, Any], field: str) -> tuple[list[str], list[list[float]]]:
    """``{column: [values]}`` (columnar) as column names and rows."""
    names = list(mapping)
    if not names:
        raise invalid(field, "must hold at least one column")
    cols = []
    for name in names:
        values = rows_list(mapping[name], f"{field}.{name}", "numbers")
        cols.append([number(v, f"{field}.{name}[{i}]") for i, v in enumerate(values)])
    n = len(cols[0])
    for name, col in zip(names, cols, strict=True):
        if len(col) != n:
            raise invalid(f"{field}.{name}", f"has {len(col)} values; {names[0]} has {n}")
    return names, [list(row) for row in zip(*cols, strict=True)]


def _strings(names: Any, field: str) -> list[str]:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise invalid(field, "must be a list of column names (strings)")
    return names


def dataframe_split(value: Any) -> Rows:
    """pandas' ``split`` orient: ``{"columns"?, "index"?, "data"}``."""
    field = "dataframe_split"
    if not isinstance(value, dict):
        raise invalid(field, 'must be an object {"columns": [...], "data": [[...]]}')
    unknown = sorted(set(value) - {"columns", "index", "data"})
    if unknown:
        raise invalid(f"{field}.{unknown[0]}", "not a field of dataframe_split")
    if "data" not in value:
        raise invalid(f"{field}.data", "is required")
    X = matrix(value["data"], f"{field}.data")
    names = _strings(value["columns"], f"{field}.columns") if "columns" in value else None
    index = value.get("index")
    if index is not None and (not isinstance(index, list) or len(index) != len(X)):
        raise invalid(f"{field}.index", f"must be a list of one label per row ({len(X)})")
    if names is not None and any(len(row) != len(names) for row in X):
        i = next(i for i, row in enumerate(X) if len(row) != len(names))
        problem = f"has {len(X[i])} values; columns has {len(names)}"
        raise invalid(f"{field}.data[{i}]", problem)
    return Rows(X, names, f"{field}.data", f"{field}.columns")


def mlflow_rows(fmt: str, body: Mapping[str, Any]) -> Rows:
    """Rows of an MLflow (or KServe V1) body whose data key is ``fmt``."""
    value = body[fmt]
    if fmt == "dataframe_split":
        return dataframe_split(value)
    if fmt == "inputs" and isinstance(value, dict):
        names, X = columns(value, fmt)
        return Rows(X, names, fmt, fmt)
    if fmt == "dataframe_records" or (
        isinstance(value, list) and value and isinstance(value[0], dict)
    ):
        names, X = records(value, fmt)
        return Rows(X, names, fmt, fmt)
    return Rows(matrix(value, fmt), None, fmt, fmt)


def predictions(out: Mapping[str, Any]) -> dict[str, Any]:
    """MLflow's and KServe V1's answer: ``{"predictions": labels}``."""
    return {"predictions": out["predictions"]}


def decode(fmt: str, body: Mapping[str, Any], ref: str, field: str = "model") -> PredictQuery:
    """The query of an MLflow or KServe V1 body (labels only) scored with model ``ref``."""
    return query_of(mlflow_rows(fmt, body), ref, ["label"], field)


def answer(out: Mapping[str, Any]) -> Answer:
    """``{"predictions": labels}`` as JSON."""
    return Answer(orjson.dumps(predictions(out)))
