"""``text/csv`` bodies for ``POST /train`` and ``POST /predict``.

A CSV body has a header row. For training, ``?model_type=`` names the model type and
``?target=`` the label column; every other column is a feature (its header is the feature name).
Every other field of the JSON body is a query parameter of the same name (``TRAIN_QUERY``):
objects as JSON (``?params={"C":10}``, ``?evaluation={"cv":5}``, ``?search={"nu":[0.1,1]}``,
``?tags=``), the rest as text (``?name=``, ``?background=true``, ``?search_scoring=f1``, ...);
``?test_fraction=`` and ``?cv=`` are short for those keys of ``evaluation``. Labels that are all whole numbers ("1", "1.0") become integers, otherwise strings. For
prediction, ``?model=`` names the model and ``?outputs=`` (repeatable) the outputs; the header
puts the columns in the model's order.

A training's CSV becomes the JSON payload of ``POST /train`` (``train_payload``, validated by
its schema); a predict's becomes the query (``decode_predict``, validated by ``PredictRequest``),
so both content types go through one schema and one set of checks.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any, Protocol

import numpy as np

from service.errors import ApiError, BadRequest, InvalidInput, detail
from service.inference.query import PredictQuery
from service.repository.store import ModelStore
from service.schemas.predict import PredictRequest
from service.wire.csv_matrix import numeric_matrix
from service.wire.validation import validated


class QueryValues(Protocol):
    """A request's query string, as Starlette's ``QueryParams`` reads it."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def getlist(self, key: str) -> list[str]: ...


#: A whole number as a CSV cell may spell it: "1", "-2", "1.0", "0.00" (18 digits at most, so
#: it fits int64; longer ones stay strings).
_WHOLE = re.compile(r"^[+-]?(\d{1,18})(?:\.0*)?$")


def as_labels(cells: list[str]) -> list[int] | list[str]:
    """Labels of a CSV column: integers when every cell is a whole number, else the strings."""
    if all(_WHOLE.match(cell) for cell in cells):
        return [int(cell.split(".")[0]) for cell in cells]
    return cells


def read_text(raw: bytes) -> str:
    """A CSV body as text (400 when it is not UTF-8, 422 when it is one line)."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadRequest("the CSV body is not UTF-8 text", [detail("body", "not UTF-8")]) from None
    if "\n" not in text and "\r" not in text and text.strip():  # strip copies: test it last
        raise InvalidInput(
            "the CSV body is one line: it has no line breaks between its rows",
            [
                detail(
                    "body",
                    "curl -d @file.csv strips the file's newlines; send it with "
                    "--data-binary @file.csv",
                )
            ],
        )
    return text


def read_table(raw: bytes | str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a CSV body (400 when it is not UTF-8 text, 422 when it has no rows)."""
    text = raw if isinstance(raw, str) else read_text(raw)
    try:
        table = [row for row in csv.reader(io.StringIO(text)) if row]
    except csv.Error:
        raise BadRequest("the CSV body could not be parsed", [detail("body", "bad CSV")]) from None
    if len(table) < 2:
        raise InvalidInput("the CSV has no data rows", [detail("body", "needs a header and rows")])
    header = [name.strip() for name in table[0]]
    for i, row in enumerate(table[1:]):
        if len(row) != len(header):
            raise InvalidInput(
                "ragged CSV rows",
                [detail(f"X[{i}]", f"has {len(row)} cells; the header has {len(header)}")],
            )
    return header, table[1:]


def _shown(name: str, limit: int = 40) -> str:
    """A column name for a message, quoted and cut to ``limit`` characters."""
    return repr(name if len(name) <= limit else name[:limit] + "...")


def check_distinct(header: list[str]) -> None:
    """422 naming the first column whose header appears more than once."""
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InvalidInput(
                "duplicate CSV columns",
                [
                    detail(
                        "feature_names", f"column {_shown(name)} appears {header.count(name)} times"
                    )
                ],
            )
        seen.add(name)


def parse_numbers(
    rows: list[list[str]],
    columns: list[int],
    names: list[str],
    unused: frozenset[int] = frozenset(),
) -> list[list[float]]:
    """The chosen columns as floats (422 naming the cell when one is not a number).

    Columns in ``unused`` (positions in ``columns``) are not read: they hold 0.0, to be dropped.
    """
    out = []
    for i, row in enumerate(rows):
        values = []
        for j, col in enumerate(columns):
            if j in unused:
                values.append(0.0)
                continue
            try:
                values.append(float(row[col]))
            except ValueError:
                raise InvalidInput(
                    "a CSV cell is not a number",
                    [detail(f"X[{i}][{j}]", f"column {names[j]!r} must hold numbers")],
                ) from None
        out.append(values)
    return out


def _require(query: QueryValues, key: str) -> str:
    value = query.get(key)
    if not value:
        raise InvalidInput(
            f"query parameter {key} is required with text/csv", [detail(key, "is required")]
        )
    return value


#: The query of a CSV training: every field of the JSON body but the rows (X, y, feature_names),
#: and the ``evaluation`` shortcuts. Objects are JSON; the rest go to the schema as text.
TRAIN_QUERY = {
    "model_type": "model type (required)",
    "target": "label column (required)",
    "name": "model name",
    "params": 'params as a JSON object, e.g. {"C": 10}',
    "evaluation": 'evaluation as a JSON object, e.g. {"cv": 5, "random_state": 0}',
    "test_fraction": "hold out this share for evaluation (evaluation.test_fraction)",
    "cv": "folds of cross-validation (evaluation.cv)",
    "search": 'grid search as a JSON object, e.g. {"C": [0.1, 1, 10]}',
    "search_scoring": "accuracy, f1 or roc_auc",
    "background": "true to answer 202 with a job",
    "tags": 'tags as a JSON object, e.g. {"team": "fraud"}',
    "description": "what the model is for",
    "preprocess": "standard or none",
    "replace_schema": "true to let this training change the name's type or features",
}
JSON_QUERY = frozenset({"params", "evaluation", "search", "tags"})
EVALUATION_SHORTCUTS = ("test_fraction", "cv")


def _json_object(query: QueryValues, key: str) -> Any:
    """The JSON object of ``?key=`` (422 naming ``key`` when it is not JSON; the schema checks
    the rest)."""
    try:
        return json.loads(query[key])
    except (ValueError, RecursionError):
        raise InvalidInput(f"{key} is not JSON", [detail(key, "must be a JSON object")]) from None


def train_payload(
    raw: bytes, query: QueryValues, store: ModelStore | None = None
) -> dict[str, Any]:
    """The ``POST /train`` JSON body equivalent to a CSV body and its query."""
    model_type, target = _require(query, "model_type"), _require(query, "target")
    fast = numeric_table(raw, target)
    if fast is not None:
        names, X, labels = fast
        payload: dict[str, Any] = {
            "model_type": model_type,
            "X": X,
            "y": as_labels(labels),
            "feature_names": names,
            "target": target,
        }
        return _with_query(payload, query)
    header, rows = read_table(raw)
    if target not in header:
        raise InvalidInput("target column not found", [detail("target", "not a CSV column")])
    if header.count(target) > 1:
        raise InvalidInput(
            "duplicate CSV columns",
            [detail("target", f"column {_shown(target)} appears {header.count(target)} times")],
        )
    check_distinct(header)
    t = header.index(target)
    features = [j for j in range(len(header)) if j != t]
    names = [header[j] for j in features]
    labels = [row[t].strip() for row in rows]
    if any(label == "" for label in labels):
        raise InvalidInput("a label is empty", [detail("y", "every row needs a label")])
    payload = {
        "model_type": model_type,
        "X": parse_numbers(rows, features, names),
        "y": as_labels(labels),
        "feature_names": names,
        "target": target,
    }
    return _with_query(payload, query)


def numeric_table(raw: bytes, target: str) -> tuple[list[str], np.ndarray, list[str]] | None:
    """Feature names, float64 rows and label cells of a plain CSV whose features are numbers
    (``csv_matrix``: no ``csv.reader``, no ``float`` per cell; breast cancer: 1 ms against
    10 ms); None when the general path must read it (it then gives the exact error)."""
    text = read_text(raw)  # its 400 and 422 first, as on the general path
    header: list[str] = []

    def read_all(names: list[str]) -> frozenset[int]:
        header[:] = names
        if names.count(target) != 1 or len(set(names)) != len(names):
            return frozenset(range(len(names)))  # no column left: the general path
        return frozenset()

    # numeric labels too: every column at once (0.4 ms); else all but the labels (loadtxt)
    fast = numeric_matrix(raw, read_all)
    if fast is None and header.count(target) == 1 and len(set(header)) == len(header):
        fast = numeric_matrix(raw, lambda names: frozenset({names.index(target)}))
    if fast is None:
        return None
    t = header.index(target)
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").strip("\n").split("\n")[1:]
    labels = [line.split(",")[t].strip() for line in lines if line]
    matrix = fast[1]
    if len(labels) != matrix.shape[0] or any(label == "" for label in labels):
        return None
    return [name for j, name in enumerate(header) if j != t], np.delete(matrix, t, axis=1), labels


def _with_query(payload: dict[str, Any], query: QueryValues) -> dict[str, Any]:
    """``payload`` with the query's other fields of the JSON body (``TRAIN_QUERY``)."""
    for key in TRAIN_QUERY.keys() - payload.keys() - set(EVALUATION_SHORTCUTS):
        if query.get(key):
            payload[key] = _json_object(query, key) if key in JSON_QUERY else query[key]
    for key in EVALUATION_SHORTCUTS:
        evaluation = payload.setdefault("evaluation", {})
        if query.get(key) and isinstance(evaluation, dict):
            if key in evaluation:
                raise InvalidInput(
                    f"{key} given twice", [detail(key, "also given in evaluation; give it once")]
                )
            evaluation[key] = query[key]
    if payload["evaluation"] == {} and not query.get("evaluation"):
        del payload["evaluation"]
    return payload


def unused_columns(store: ModelStore | None, model: str, header: list[str]) -> frozenset[int]:
    """Positions of the columns the model does not use: its target, or any not among its features."""
    if store is None:
        return frozenset()
    try:
        record = store.model_record(store.resolve(model))
    except ApiError:  # the predict itself reports the reference
        return frozenset()
    names, target = record.get("feature_names"), record.get("target")
    if names:
        features = set(names)
        return frozenset(j for j, column in enumerate(header) if column not in features)
    return frozenset(j for j, column in enumerate(header) if column == target)


def decode_predict(raw: bytes, query: QueryValues, store: ModelStore | None = None) -> PredictQuery:
    """The query of a ``POST /predict`` CSV body and its query string.

    Columns the model does not use (``unused_columns``) are not parsed, so a non-numeric target
    column does no harm; the predict leaves them out and lists them in ``dropped_columns``. A
    plain numeric CSV becomes a float64 array at once (``csv_matrix``), which the schema's
    ``Matrix`` takes as it is; any other goes through ``csv.reader`` and ``float`` per cell.
    """
    model = _require(query, "model")
    text = read_text(raw)

    def unused(header: list[str]) -> frozenset[int]:
        check_distinct(header)
        return unused_columns(store, model, header)

    fast = numeric_matrix(raw, unused)
    if fast is not None:
        header, X = fast
    else:
        header, rows = read_table(text)
        X = parse_numbers(rows, list(range(len(header))), header, unused(header))
    payload: dict[str, Any] = {"model": model, "X": X, "feature_names": header}
    if query.getlist("outputs"):
        payload["outputs"] = query.getlist("outputs")
    if query.get("level"):
        payload["level"] = query["level"]
    body = validated(PredictRequest, payload)
    return PredictQuery(body.model, body.X, body.feature_names, list(body.outputs), body.level)
