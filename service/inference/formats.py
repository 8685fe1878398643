"""Other servers' scoring bodies as rows, and our outputs in their response shapes.

Pure functions; every failure is a 422 (``InvalidInput``) naming the field as the sender wrote it.

=====================  ===========================================  ===========================
format                 rows come from                               answer
=====================  ===========================================  ===========================
MLflow ``dataframe_split``    ``{"columns": [...], "data": [[...]]}``  ``{"predictions": [...]}``
MLflow ``dataframe_records``  ``[{column: value}, ...]``               ``{"predictions": [...]}``
MLflow / KServe V1 ``instances``  rows, or ``[{column: value}]``       ``{"predictions": [...]}``
MLflow ``inputs``      rows, or ``{column: [values]}``              ``{"predictions": [...]}``
Open Inference (V2)    ``inputs``: tensors ``{name, shape,          ``{model_name, model_version,
                       datatype, data}``                            id, outputs: [tensors]}``
=====================  ===========================================  ===========================

A V2 request holds either one 2-D tensor ``[rows, features]`` or one tensor per feature, each of
shape ``[rows]`` or ``[rows, 1]`` and named after the feature (columns are then put in the
model's order by name). V2 output names are ``label``, ``decision`` and ``probability``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.errors import ErrorDetail, InvalidInput, detail

MLFLOW_KEYS = ("dataframe_split", "dataframe_records", "instances", "inputs")
V2 = "v2"
#: Keys a body of each format may hold beside its data key.
EXTRA_KEYS = {V2: {"id", "outputs", "parameters"}, "mlflow": {"params"}}
V2_NUMERIC = frozenset(
    {"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"}
    | {"FP16", "FP32", "FP64"}
)
V2_OUTPUTS = {"label": "label", "decision": "decision", "probability": "probability"}
MAX_DEPTH = 4
INT64_MAX = 2**63 - 1
"""Deepest nesting of V2 tensor data, and most dimensions of a shape, accepted (rows of features
need 2)."""


@dataclass(frozen=True)
class Rows:
    """Rows of features pulled out of a foreign body, and where in that body they were."""

    X: list[list[float]] | np.ndarray
    feature_names: list[str] | None
    field: str
    names_field: str


def invalid(field: str, problem: str, message: str = "the body is not valid") -> InvalidInput:
    return InvalidInput(message, [detail(field, problem)])


def body_format(body: Mapping[str, Any]) -> str | None:
    """``None`` for our own body, else the format key (``instances``, ...) or ``"v2"``."""
    if "X" in body:
        return None
    found = [key for key in MLFLOW_KEYS if key in body]
    if not found:
        return None
    if len(found) > 1:
        raise invalid("body", f"holds {found}; send exactly one of {list(MLFLOW_KEYS)}")
    key = found[0]
    inputs = body.get("inputs")
    is_v2 = key == "inputs" and isinstance(inputs, list) and inputs and isinstance(inputs[0], dict)
    fmt = V2 if is_v2 else key
    allowed = EXTRA_KEYS[V2] if is_v2 else EXTRA_KEYS["mlflow"]
    for extra in body:
        if extra != key and extra not in allowed:
            where = "the query (?model=)" if extra == "model" else None
            problem = f"not a field of the {fmt} format"
            raise invalid(extra, f"{problem}; give the model in {where}" if where else problem)
    params = body.get("params")
    if fmt != V2 and params not in (None, {}):
        raise invalid("params", "bsvm models take no inference parameters")
    return fmt


def _number(value: Any, field: str) -> float:
    """A JSON number as a float (422 for strings, booleans, null or overflowing integers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(field, "must be a number", "values must be numbers")
    try:
        return float(value)
    except OverflowError:
        raise invalid(field, "is too large for a double", "values must be numbers") from None


def _list(value: Any, field: str, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise invalid(field, f"must be a list of {what}")
    if not value:
        raise invalid(field, "must hold at least one row", "no rows were sent")
    return value


def matrix(rows: Any, field: str) -> list[list[float]]:
    """A list of rows of numbers as floats; ``field[i][j]`` names a bad cell."""
    out = []
    for i, row in enumerate(_list(rows, field, "rows")):
        if not isinstance(row, list):
            raise invalid(f"{field}[{i}]", "must be a list of numbers (one row)")
        out.append([_number(v, f"{field}[{i}][{j}]") for j, v in enumerate(row)])
    return out


def records(items: Any, field: str) -> tuple[list[str], list[list[float]]]:
    """``[{column: value}, ...]`` as column names (the first record's order) and rows."""
    items = _list(items, field, "objects {column: value}")
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
        out.append([_number(item[name], f"{field}[{i}].{name}") for name in names])
    return names, out


def columns(mapping: Mapping[str, Any], field: str) -> tuple[list[str], list[list[float]]]:
    """``{column: [values]}`` (columnar) as column names and rows."""
    names = list(mapping)
    if not names:
        raise invalid(field, "must hold at least one column")
    cols = []
    for name in names:
        values = _list(mapping[name], f"{field}.{name}", "numbers")
        cols.append([_number(v, f"{field}.{name}[{i}]") for i, v in enumerate(values)])
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


def _flatten(data: Any, field: str, depth: int = 0) -> list[Any]:
    """Row-major elements of flat or nested tensor data."""
    if depth > MAX_DEPTH:
        raise invalid(field, f"is nested deeper than {MAX_DEPTH} levels")
    out: list[Any] = []
    for value in data:
        if isinstance(value, list):
            out.extend(_flatten(value, field, depth + 1))
        else:
            out.append(value)
    return out


def check_shape(shape: Any, field: str) -> list[int]:
    """A V2 tensor's shape: 1 to ``MAX_DEPTH`` int64 dimensions ≥ 0 (422 naming ``field``).

    Checked before anything multiplies them: the product of a million big dimensions takes hours
    (quadratic big-integer arithmetic), and that of a few 4,000-digit ones is too long for the
    message that would print it.
    """
    if not isinstance(shape, list) or not shape:
        raise invalid(field, "must be a list of non-negative integers")
    if len(shape) > MAX_DEPTH:
        raise invalid(field, f"has {len(shape)} dimensions; at most {MAX_DEPTH}")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise invalid(field, "must be a list of non-negative integers")
    if max(shape) > INT64_MAX:
        raise invalid(field, "has a dimension past 2^63 - 1 (V2 shapes are int64)")
    return shape


def v2_tensor(tensor: Any, i: int) -> tuple[str, list[int], list[float]]:
    """Name, shape and flat float data of one V2 request input (422 naming ``inputs[i].*``)."""
    field = f"inputs[{i}]"
    if not isinstance(tensor, dict):
        raise invalid(field, "must be a tensor {name, shape, datatype, data}")
    for key in ("name", "shape", "datatype", "data"):
        if key not in tensor:
            raise invalid(f"{field}.{key}", "is required")
    name, shape, datatype, data = (tensor[k] for k in ("name", "shape", "datatype", "data"))
    if not isinstance(name, str) or not name:
        raise invalid(f"{field}.name", "must be a non-empty string")
    if datatype not in V2_NUMERIC:
        raise invalid(f"{field}.datatype", f"must be a numeric type: {sorted(V2_NUMERIC)}")
    shape = check_shape(shape, f"{field}.shape")
    if not isinstance(data, list):
        raise invalid(f"{field}.data", "must be a list (flat or nested) of numbers")
    flat = _flatten(data, f"{field}.data")
    if len(flat) != math.prod(shape):
        problem = f"holds {len(flat)} values; shape {shape} needs {math.prod(shape)}"
        raise invalid(f"{field}.data", problem)
    return name, shape, [_number(v, f"{field}.data[{k}]") for k, v in enumerate(flat)]


def v2_rows(inputs: Any) -> Rows:
    """Rows of a V2 request: one ``[rows, features]`` tensor, or one column tensor per feature."""
    return tensor_rows([v2_tensor(t, i) for i, t in enumerate(_list(inputs, "inputs", "tensors"))])


def tensor_rows(
    tensors: Sequence[tuple[str, list[int], Any]], field: str = "inputs[0].data"
) -> Rows:
    """Rows of V2 tensors ``(name, shape, flat values)``: one ``[rows, features]`` tensor, or one
    column tensor per feature. Values are lists, or float64 arrays (binary data, whose rows come
    out as one matrix); ``field`` names the single tensor's values in error details."""
    if len(tensors) == 1:
        _, shape, flat = tensors[0]
        if len(shape) != 2:
            problem = f"has shape {shape}; one input must be 2-D [rows, features]"
            raise invalid("inputs[0].shape", problem)
        n, k = shape
        if n == 0 or k == 0:
            raise invalid("inputs[0].shape", "needs at least one row and one feature")
        if isinstance(flat, np.ndarray):
            return Rows(flat.reshape(n, k), None, field, "")
        return Rows([flat[r * k : (r + 1) * k] for r in range(n)], None, field, "")
    names = [name for name, _, _ in tensors]
    if len(set(names)) != len(names):
        raise invalid("inputs", "tensor names must be distinct (one per feature)")
    n = tensors[0][1][0]
    for i, (_, shape, _) in enumerate(tensors):
        if shape not in ([n], [n, 1]):
            problem = f"has shape {shape}; with several inputs each is one column [{n}] or [{n}, 1]"
            raise invalid(f"inputs[{i}].shape", problem)
    if n == 0:
        raise invalid("inputs[0].shape", "needs at least one row", "no rows were sent")
    if any(isinstance(flat, np.ndarray) for _, _, flat in tensors):
        X = np.column_stack([np.asarray(flat, dtype=np.float64) for _, _, flat in tensors])
        return Rows(X, names, "inputs", "inputs[].name")
    X = [[flat[r] for _, _, flat in tensors] for r in range(n)]
    return Rows(X, names, "inputs", "inputs[].name")


def v2_requested(outputs: Any) -> list[str] | None:
    """Our output names for a V2 ``outputs`` list; ``None`` when absent (all outputs)."""
    if outputs is None:
        return None
    if not isinstance(outputs, list) or not outputs:
        raise invalid("outputs", "must be a non-empty list of {name}")
    wanted = []
    for i, item in enumerate(outputs):
        name = item.get("name") if isinstance(item, dict) else None
        if name not in V2_OUTPUTS:
            raise invalid(f"outputs[{i}].name", f"must be one of {sorted(V2_OUTPUTS)}")
        if V2_OUTPUTS[name] not in wanted:
            wanted.append(V2_OUTPUTS[name])
    return wanted


def renamed(details: Sequence[ErrorDetail], rows: Rows) -> list[ErrorDetail]:
    """Details naming our fields (``X[i][j]``, ``feature_names``) named as in the sender's body."""
    out = []
    for d in details:
        field = d.field
        if field == "X" or field.startswith("X["):
            field = rows.field + field[1:]
        elif field == "feature_names" and rows.names_field:
            field = rows.names_field
        out.append(ErrorDetail(field=field, problem=d.problem))
    return out


def predictions(out: Mapping[str, Any]) -> dict[str, Any]:
    """MLflow's and KServe V1's answer: ``{"predictions": labels}``."""
    return {"predictions": out["predictions"]}


def _label_type(classes: Sequence[Any]) -> str:
    return "INT64" if all(isinstance(c, int) for c in classes) else "BYTES"


def _shape(values: list[Any]) -> list[int]:
    return (
        [len(values), len(values[0])] if values and isinstance(values[0], list) else [len(values)]
    )


def _flat(values: list[Any]) -> list[Any]:
    return [v for row in values for v in row] if values and isinstance(values[0], list) else values


def v2_response(out: Mapping[str, Any], request_id: str) -> dict[str, Any]:
    """A V2 inference response of our outputs (labels BYTES or INT64; scores FP64, flat)."""
    classes = json.dumps(out["classes"])
    tensors = []
    if out.get("predictions") is not None:
        labels = out["predictions"]
        tensors.append(
            {"name": "label", "shape": [len(labels)], "datatype": _label_type(out["classes"])}
            | {"data": labels}
        )
    for name, key in (("decision", "decision_function"), ("probability", "probabilities")):
        values = out.get(key)
        if values is not None:
            tensors.append(
                {"name": name, "shape": _shape(values), "datatype": "FP64"}
                | {"parameters": {"classes": classes}, "data": _flat(values)}
            )
    return {
        "model_name": out["name"],
        "model_version": str(out["version"]),
        "id": request_id,
        "parameters": {"model_id": out["model_id"]},
        "outputs": tensors,
    }


def v2_metadata(record: Mapping[str, Any], versions: list[int], outputs: list[str]) -> dict:
    """V2 model metadata: one ``[-1, n_features]`` FP64 input and the model's outputs."""
    classes = record["classes"]
    k = len(classes)
    shapes = {"label": [-1], "decision": [-1] if k == 2 else [-1, k], "probability": [-1, k]}
    types = {"label": _label_type(classes), "decision": "FP64", "probability": "FP64"}
    return {
        "name": record["name"],
        "versions": [str(v) for v in versions],
        "platform": "bsvm",
        "inputs": [
            {"name": "input-0", "datatype": "FP64", "shape": [-1, int(record["n_features"])]}
        ],
        "outputs": [
            {"name": name, "datatype": types[name], "shape": shapes[name]}
            for name in outputs
            if name in shapes
        ],
    }


def _columns_of(values: list[Any], prefix: str, classes: Sequence[Any]) -> tuple[list[str], list]:
    """Header names and columns of one output: 1-D → one column, 2-D → one per class."""
    if values and isinstance(values[0], list):
        return [f"{prefix}_{c}" for c in classes], [list(c) for c in zip(*values, strict=True)]
    suffix = f"_{classes[-1]}" if prefix == "decision" else ""
    return [prefix + suffix], [values]


def output_columns(out: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Our outputs as a header and one list per column.

    Columns: ``label``; ``decision_<class>`` (one column, for the second class, when binary);
    ``probability_<class>``; ``interval_lower``/``interval_upper`` (``_<class>`` when K > 2).
    """
    classes = out["classes"]
    parts: list[tuple[list[str], list]] = []
    if out.get("predictions") is not None:
        parts.append((["label"], [out["predictions"]]))
    if out.get("decision_function") is not None:
        parts.append(_columns_of(out["decision_function"], "decision", classes))
    if out.get("probabilities") is not None:
        parts.append(_columns_of(out["probabilities"], "probability", classes))
    intervals = out.get("intervals")
    if intervals is not None:
        parts.append(_columns_of(intervals["lower"], "interval_lower", classes))
        parts.append(_columns_of(intervals["upper"], "interval_upper", classes))
    header = [name for names, _ in parts for name in names]
    return header, [column for _, cols in parts for column in cols]


def table(out: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Our outputs as a header and one row per input row (the rows of ``output_columns``)."""
    header, cols = output_columns(out)
    return header, [list(row) for row in zip(*cols, strict=True)]
