"""Which format a JSON body is, from its keys: ours, MLflow's, KServe V1's or V2's.

=====================  ===========================================  ===========================
format                 rows come from                               answer
=====================  ===========================================  ===========================
ours                   ``{"model", "X", ...}`` (``wire.ours``)       ``PredictResponse``
MLflow ``dataframe_split``    ``{"columns": [...], "data": [[...]]}``  ``{"predictions": [...]}``
MLflow ``dataframe_records``  ``[{column: value}, ...]``               ``{"predictions": [...]}``
MLflow / KServe V1 ``instances``  rows, or ``[{column: value}]``       ``{"predictions": [...]}``
MLflow ``inputs``      rows, or ``{column: [values]}``              ``{"predictions": [...]}``
Open Inference (V2)    ``inputs``: tensors ``{name, shape,          ``{model_name, model_version,
                       datatype, data}``                            id, outputs: [tensors]}``
=====================  ===========================================  ===========================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.wire.rows import invalid

MLFLOW_KEYS = ("dataframe_split", "dataframe_records", "instances", "inputs")
V2 = "v2"
#: Keys a body of each format may hold beside its data key.
EXTRA_KEYS = {V2: {"id", "outputs", "parameters"}, "mlflow": {"params"}}


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
