"""A training task as bytes for the job queue: arrays in an ``.npz``, the rest as JSON; no pickle.

A queued job outlives the process that accepted it, so its task is stored in the database. It is
read back with ``allow_pickle=False``: nothing that a client sent is ever unpickled.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from service.model_types import ModelTypes
from service.training.tasks import TrainTask

ARRAYS = ("X", "y", "X_test", "y_test")


def encode_task(task: TrainTask) -> bytes:
    """``task`` as npz bytes: X, y (and the held-out split) plus a JSON header."""
    header = {
        "model_type": task.model_type,
        "params": task.params,
        "meta": task.meta,
        "memory_limit_mb": task.memory_limit_mb,
        "cv": task.cv,
        "search": task.search,
        "data": task.data,
    }
    arrays = {k: getattr(task, k) for k in ARRAYS if getattr(task, k) is not None}
    arrays = {k: np.asarray(v, dtype=str) if v.dtype == object else v for k, v in arrays.items()}
    buffer = io.BytesIO()
    np.savez(buffer, header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8), **arrays)
    return buffer.getvalue()


def decode_task(data: bytes, model_types: ModelTypes) -> TrainTask:
    """The task ``encode_task`` wrote; KeyError when its model type is not registered here."""
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        header: dict[str, Any] = json.loads(npz["header"].tobytes().decode())
        arrays = {k: npz[k] for k in ARRAYS if k in npz.files}
    spec = model_types[header["model_type"]]
    return TrainTask(
        spec=spec,
        params=header["params"],
        meta=header["meta"],
        memory_limit_mb=header.get("memory_limit_mb"),
        cv=header.get("cv"),
        search=header.get("search"),
        data=header.get("data"),
        **{"X": None, "y": None, **arrays},
    )
