"""Our own ``POST /predict`` JSON body, read straight into numpy, and its answer in one dump.

A valid body is parsed once, by simdjson with its ``X`` copied straight into a float64 matrix
(``wire.simd``) or, where that reader is unsure, by orjson with ``X`` packed into one: no
pydantic validation of every number. A body that reader is not sure of (bad JSON, a field of the
wrong type or out of its bounds, an unknown field, a ragged or non-numeric ``X``) is validated by
the ``PredictRequest`` model, as FastAPI would validate it, so it answers the same 4xx envelopes,
field names and messages. The outputs are serialised once by orjson.
"""

from __future__ import annotations

import functools
import json
import struct
from typing import Any, get_args

import numpy as np
import orjson

from service.errors import BadRequest, detail
from service.inference.query import DEFAULT_LEVEL, DEFAULT_OUTPUTS, PredictQuery
from service.schemas.predict import (
    MAX_OUTPUTS,
    MODEL_REF_MAX_CHARS,
    Output,
    PredictRequest,
    PredictResponse,
)
from service.wire import csv_answer, simd
from service.wire.answer import Answer
from service.wire.media import wants_csv
from service.wire.validation import MISSING, invalid_fields, validated

FIELDS = frozenset(PredictRequest.model_fields)
OUTPUTS = frozenset(get_args(Output))
RESPONSE_FIELDS = tuple(PredictResponse.model_fields)
_RESPONSE_KEYS = frozenset(RESPONSE_FIELDS)
_NULL_RESPONSE = dict.fromkeys(RESPONSE_FIELDS)
SIMD_MIN_BYTES = 4096
"""Bodies from this size are read by simdjson (``wire.simd``); below it orjson's lower fixed cost
wins (one row of 30 numbers: 4.5 µs against 6.3; they cross at about 5 rows, 3 KB)."""
PACK_ROWS = 4096
"""Rows of a body packed into bytes at a time (``_matrix``)."""


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
    return np.ndarray((len(rows), width), dtype=np.float64, buffer=packed)  # one call, no view


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
    read = simd.read(raw) if len(raw) >= SIMD_MIN_BYTES else None
    if read is not None:
        return read
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict:
        return None
    return value, value.pop("X", None)


def _valid_options(value: dict[str, Any]) -> bool:
    """Whether the body's fields beside ``model`` and ``X`` are all known and certainly valid:
    ``outputs``, ``level``, ``feature_names``."""
    if not value.keys() <= FIELDS:
        return False
    outputs = value.get("outputs", DEFAULT_OUTPUTS)
    if outputs is not DEFAULT_OUTPUTS:  # the defaults are valid as they are
        if type(outputs) is not list or not 1 <= len(outputs) <= MAX_OUTPUTS:
            return False
        if not all(type(name) is str and name in OUTPUTS for name in outputs):
            return False
    level = value.get("level", DEFAULT_LEVEL)
    if level is not DEFAULT_LEVEL and (not _is_number(level) or not 0.0 < level < 1.0):
        return False
    names = value.get("feature_names")
    return names is None or (type(names) is list and all(type(n) is str for n in names))


def fast_body(raw: bytes) -> PredictQuery | None:
    """The body's query when it is certainly a valid ``PredictRequest``, else ``None``."""
    read = _read(raw)
    if read is None:
        return None
    value, rows = read
    model = value.get("model")
    if type(model) is not str or not 1 <= len(model) <= MODEL_REF_MAX_CHARS:
        return None
    if len(value) > 1 and not _valid_options(value):  # just ``model`` (and ``X``): no options
        return None
    X = rows if type(rows) is np.ndarray else _matrix(rows)
    if X is None:
        return None
    return PredictQuery(
        model,
        X,
        value.get("feature_names"),
        list(value.get("outputs", DEFAULT_OUTPUTS)),
        float(value.get("level", DEFAULT_LEVEL)),
    )


def encode(out: dict[str, Any]) -> bytes:
    """The outputs as ``PredictResponse`` JSON: every field in order, absent ones null."""
    if out.keys() <= _RESPONSE_KEYS:  # laid over the fields in order (C-level, no loop)
        content = {**_NULL_RESPONSE, **out}
    else:
        content = {key: out.get(key) for key in RESPONSE_FIELDS}
    if content["dropped_columns"] is None:
        content["dropped_columns"] = []
    return orjson.dumps(content)


def json_value(raw: bytes) -> Any:
    """The body as JSON, read as FastAPI reads a body: none is ``MISSING``, bad JSON the 400."""
    if not raw:
        return MISSING
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise invalid_fields([{"type": "json_invalid", "loc": ("body", 0)}]) from None
    except Exception:  # not UTF-8, nested too deep: FastAPI's 400
        raise BadRequest(
            "request body could not be parsed",
            [detail("body", "the body could not be parsed (bad JSON, or nested too deep)")],
        ) from None


def validate(value: Any) -> PredictQuery:
    """The query of our own body read as JSON (``json_value``), validated as FastAPI validates a
    ``PredictRequest`` body: no body says which fields to send, anything else the model's 422s."""
    body = validated(PredictRequest, value)
    return PredictQuery(body.model, body.X, body.feature_names, list(body.outputs), body.level)


def answer(out: dict[str, Any], accept: str | None) -> Answer:
    """Our outputs as ``PredictResponse`` JSON, or as CSV when ``Accept`` prefers it."""
    if accept is not None and wants_csv(accept):  # no Accept: JSON, without asking
        return csv_answer.answer(out)
    return Answer(encode(out))
