"""Open Inference Protocol (KServe V2) JSON tensors as rows, and our outputs as a V2 response.

A V2 request holds either one 2-D tensor ``[rows, features]`` or one tensor per feature, each of
shape ``[rows]`` or ``[rows, 1]`` and named after the feature (columns are then put in the
model's order by name). V2 output names are ``label``, ``decision`` and ``probability``.

Pure functions; every failure is a 422 (``InvalidInput``) naming the field as the sender wrote it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from service.inference.query import PredictQuery
from service.schemas.outputs import POINT_OUTPUTS
from service.wire.rows import Rows, invalid, number, query_of, rows_list

V2_NUMERIC = frozenset(
    {"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"}
    | {"FP16", "FP32", "FP64"}
)
V2_OUTPUTS = {spec.short: spec.short for spec in POINT_OUTPUTS}
MAX_DEPTH = 4
INT64_MAX = 2**63 - 1
"""Deepest nesting of V2 tensor data, and most dimensions of a shape, accepted (rows of features
need 2)."""


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
    return name, shape, [number(v, f"{field}.data[{k}]") for k, v in enumerate(flat)]


def v2_rows(inputs: Any) -> Rows:
    """Rows of a V2 request: one ``[rows, features]`` tensor, or one column tensor per feature."""
    return tensor_rows(
        [v2_tensor(t, i) for i, t in enumerate(rows_list(inputs, "inputs", "tensors"))]
    )


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
    for spec in POINT_OUTPUTS:
        values = out.get(spec.key)
        if values is None:
            continue
        if spec.labels:
            datatype, parameters = _label_type(out["classes"]), {}
        else:
            datatype, parameters = "FP64", {"parameters": {"classes": classes}}
        tensors.append(
            {"name": spec.short, "shape": _shape(values), "datatype": datatype}
            | parameters
            | {"data": _flat(values)}
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


def decode(body: Mapping[str, Any], ref: str, field: str = "model") -> PredictQuery:
    """The query of a V2 JSON request (its tensors' data in JSON) scored with model ``ref``."""
    rows = v2_rows(body.get("inputs"))
    return query_of(rows, ref, v2_requested(body.get("outputs")), field)
