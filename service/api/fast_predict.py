"""``POST /predict`` with our own JSON body, read straight into numpy and answered in one dump.

A valid body of our own format is parsed once, by simdjson with its ``X`` copied straight into a
float64 matrix (``simd_body``) or, where that reader is unsure, by orjson with ``X`` packed into
one, and the outputs serialised once by orjson: no pydantic validation of every number, no
second parse, no dependency resolution, no re-validation of the response model. Anything this
reader is not sure of (bad JSON, a field of the wrong type or out of its bounds, an unknown
field, a ragged or non-numeric ``X``) returns ``None`` and the request takes the full FastAPI path
with the ``PredictRequest`` model, which answers exactly as it always has: the same 4xx
envelopes, field names and messages. ``PredictRequest`` stays the declared body, so the OpenAPI
document does not change.

A request whose model is already in memory (its reference resolved, its record and estimator
cached) and whose working memory is small is scored on the event loop; any other is scored in
the thread pool, as before. Both hold a slot of the ``PredictGate``. ``service.api.shortcut``
serves such requests straight from the request middleware.
"""

from __future__ import annotations

import contextlib
import functools
import struct
from collections.abc import Callable
from typing import Any, TypeVar, get_args

import numpy as np
import orjson
from starlette.concurrency import run_in_threadpool

from service.api import simd_body
from service.api.ready_bytes import JSON_TYPE, ReadyBytes
from service.errors import ApiError
from service.inference import predict as prediction
from service.inference.limits import row_bytes
from service.schemas.predict import (
    MAX_OUTPUTS,
    MODEL_REF_MAX_CHARS,
    Output,
    PredictRequest,
    PredictResponse,
)

FIELDS = frozenset(PredictRequest.model_fields)
OUTPUTS = frozenset(get_args(Output))
DEFAULT_OUTPUTS = ("predictions",)
RESPONSE_FIELDS = tuple(PredictResponse.model_fields)
INLINE_BYTES = 2**20
"""Predicts whose working memory (rows × bytes per row) is at most this run on the event loop."""
SIMD_MIN_BYTES = 4096
"""Bodies from this size are read by simdjson (``simd_body``); below it orjson's lower fixed cost
wins (one row of 30 numbers: 4.5 µs against 6.3; they cross at about 5 rows, 3 KB)."""
T = TypeVar("T")
PACK_ROWS = 4096
"""Rows of a body packed into bytes at a time (``_matrix``)."""


class FastBody:
    """What ``prediction.predict`` reads off a body, with ``X`` already a float64 matrix."""

    __slots__ = ("X", "feature_names", "level", "model", "outputs")

    def __init__(
        self,
        model: str,
        X: np.ndarray,
        outputs: list[str],
        level: float,
        feature_names: list[str] | None,
    ) -> None:
        self.model, self.X, self.outputs = model, X, outputs
        self.level, self.feature_names = level, feature_names


def _is_number(value: Any) -> bool:
    return type(value) is float or type(value) is int


@functools.lru_cache(maxsize=16)
def _row_format(width: int) -> struct.Struct:
    """``width`` native doubles: packs one row of numbers into its bytes."""
    return struct.Struct(f"{width}d")


def _packed(rows: list[Any], pack: Any, width: int) -> np.ndarray | None:
    """``rows`` packed one by one into a writable float64 matrix, or None (see ``_matrix``)."""
    packed = bytearray()  # grown in place (no list of row bytes), and writable as np.array's
    try:
        for row in rows:
            if type(row) is not list:
                return None
            packed += pack(*row)
    except (struct.error, OverflowError):
        return None  # ragged, or not numbers
    return np.frombuffer(packed, dtype=np.float64).reshape(len(rows), width)


def _matrix(rows: Any) -> np.ndarray | None:
    """``rows`` as a float64 matrix when it is a non-empty list of equal, non-empty number lists.

    Each row is packed by ``struct`` (``d``: a float as it is, an int or a bool converted as
    ``float()`` does, anything else refused): a third of the time of ``np.array`` over the nested
    lists, which first works out a dtype from every value. A row of another length, or a value
    that is not a number, returns None. Past ``PACK_ROWS`` rows, the rows are packed that many at
    a time into the matrix, so a large body does not also hold a growing copy of it.
    """
    if type(rows) is not list or not rows or type(rows[0]) is not list or not rows[0]:
        return None
    width = len(rows[0])
    pack = _row_format(width).pack
    if len(rows) <= PACK_ROWS:
        return _packed(rows, pack, width)
    out = np.empty((len(rows), width))
    for start in range(0, len(rows), PACK_ROWS):
        part = _packed(rows[start : start + PACK_ROWS], pack, width)
        if part is None:
            return None
        out[start : start + len(part)] = part
    return out


def _read(raw: bytes) -> tuple[dict[str, Any], Any] | None:
    """(the body's fields but ``X``, ``X`` as a matrix or nested lists): simdjson where it is sure
    (``simd_body``), else orjson; None when the body is not a JSON object."""
    read = simd_body.read(raw) if len(raw) >= SIMD_MIN_BYTES else None
    if read is not None:
        return read
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict:
        return None
    return value, value.pop("X", None)


def fast_body(raw: bytes) -> FastBody | None:
    """The body when it is certainly a valid ``PredictRequest``, else ``None`` (see docstring)."""
    read = _read(raw)
    if read is None:
        return None
    value, rows = read
    if not value.keys() <= FIELDS:
        return None
    model = value.get("model")
    if type(model) is not str or not 1 <= len(model) <= MODEL_REF_MAX_CHARS:
        return None
    outputs = value.get("outputs", DEFAULT_OUTPUTS)
    if type(outputs) not in (list, tuple) or not 1 <= len(outputs) <= MAX_OUTPUTS:
        return None
    if not all(type(name) is str and name in OUTPUTS for name in outputs):
        return None
    level = value.get("level", 0.95)
    if not _is_number(level) or not 0.0 < level < 1.0:
        return None
    names = value.get("feature_names")
    if names is not None and (type(names) is not list or not all(type(n) is str for n in names)):
        return None
    X = rows if type(rows) is np.ndarray else _matrix(rows)
    if X is None:
        return None
    return FastBody(model, X, list(outputs), float(level), names)


def _in_memory(store: Any, ref: str, n_rows: int, n_features: int) -> bool:
    """True when scoring ``n_rows`` rows with ``ref`` needs no I/O and little memory."""
    estimator = store.estimator_in_memory(ref)
    if estimator is None:
        return False
    return n_rows * row_bytes(estimator, n_features) <= INLINE_BYTES


async def on_loop_when_cheap(
    store: Any, ref: str, shape: tuple[int, int], run: Callable[[], T], field: str = "model"
) -> T:
    """``run()`` on the event loop when the model of ``ref`` is in memory and rows of ``shape``
    need little working memory; else in the thread pool."""
    if not _in_memory(store, ref, *shape):
        # the reference needs the registry (its cached resolution lapsed): ask it off the loop,
        # holding no predict slot (a query, not a model's memory), then look again
        with contextlib.suppress(ApiError):  # run() raises it again, with its envelope
            await run_in_threadpool(store.resolve, ref, field)
        if not _in_memory(store, ref, *shape):
            return await run_in_threadpool(run)
    return run()


def as_json(out: dict[str, Any]) -> ReadyBytes:
    """The outputs as ``PredictResponse`` JSON: every field in order, absent ones null."""
    content = {key: out.get(key) for key in RESPONSE_FIELDS}
    if content["dropped_columns"] is None:
        content["dropped_columns"] = []
    return ReadyBytes(orjson.dumps(content), [JSON_TYPE])


async def score(
    store: Any, settings: Any, gate: Any, body: FastBody, *, batcher: Any = None
) -> dict[str, Any]:
    """The outputs of ``body``, as the ``/predict`` endpoint computes them.

    A loaded model with little working memory is scored on the loop; with micro-batching on
    (``batcher``), in the thread pool, where concurrent one-row requests can meet.
    """

    def run() -> dict[str, Any]:
        with gate.slot():
            return prediction.predict(store, settings, body, batcher)

    if batcher is not None:
        return await run_in_threadpool(run)
    return await on_loop_when_cheap(store, body.model, body.X.shape, run)
