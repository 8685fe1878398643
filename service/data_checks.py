"""Checks of posted data against the service limits: every failure is a 422 naming the field."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from service.errors import InvalidInput, detail
from service.settings import Settings

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_FLOAT64 = np.dtype(np.float64)


def as_matrix(rows: Sequence[Sequence[float]], settings: Settings, field: str = "X") -> np.ndarray:
    """A finite float64 matrix of at most ``max_rows`` × ``max_features`` (422 otherwise).

    ``rows`` may be nested lists or an array (a 2-D array is never ragged).
    """
    if type(rows) is np.ndarray and rows.dtype is _FLOAT64 and rows.ndim == 2:
        n, d = rows.shape  # a decoded body's matrix: within the limits and finite, as it is
        within = 0 < n <= settings.max_rows and 0 < d <= settings.max_features
        if within and math.isfinite(np.vdot(rows, rows)):  # Σ x², not finite with a NaN or ±inf
            return rows  # (a sum that overflows is checked value by value below)
    if len(rows) == 0:
        raise InvalidInput("no rows were sent", [detail(field, "must hold at least one row")])
    width = len(rows[0])
    for i, row in enumerate(() if isinstance(rows, np.ndarray) else rows):  # arrays are not ragged
        if len(row) != width:
            raise InvalidInput(
                "ragged rows",
                [detail(f"{field}[{i}]", f"has {len(row)} values; row 0 has {width}")],
            )
    M = np.asarray(rows, dtype=np.float64)
    if M.shape[0] > settings.max_rows:
        raise InvalidInput(
            "too many rows", [detail(field, f"{M.shape[0]} rows; the limit is {settings.max_rows}")]
        )
    if M.shape[1] == 0:
        raise InvalidInput("rows are empty", [detail(field, "rows must hold at least one value")])
    if M.shape[1] > settings.max_features:
        raise InvalidInput(
            "too many features",
            [detail(field, f"{M.shape[1]} features; the limit is {settings.max_features}")],
        )
    finite = np.isfinite(M)
    if not finite.all():
        i, j = (int(v) for v in np.argwhere(~finite)[0])
        raise InvalidInput(
            "values must be finite numbers",
            [detail(f"{field}[{i}][{j}]", f"is {M[i, j]}; NaN and infinity are not allowed")],
        )
    return M


def as_labels(y: Sequence[Any], n_rows: int, settings: Settings, field: str = "y") -> np.ndarray:
    """Labels of one type (all ints or all strings), one per row, 2..max_classes classes."""
    if len(y) != n_rows:
        raise InvalidInput(
            "X and y differ in length", [detail(field, f"has {len(y)} labels for {n_rows} rows")]
        )
    kinds = {type(v) for v in y}
    if len(kinds) > 1:
        raise InvalidInput(
            "labels of mixed types", [detail(field, "labels must be all strings or all integers")]
        )
    if kinds == {int} and not all(INT64_MIN <= v <= INT64_MAX for v in y):
        raise InvalidInput(
            "integer labels out of range",
            [detail(field, "integer labels must fit in 64 bits; send them as strings")],
        )
    labels = np.asarray(y, dtype=object if kinds == {str} else np.int64)
    if kinds == {str}:
        labels = labels.astype(str)
    n_classes = np.unique(labels).size
    if n_classes < 2:
        raise InvalidInput(
            "one class only", [detail(field, "a classifier needs at least 2 distinct labels")]
        )
    if n_classes > settings.max_classes:
        raise InvalidInput(
            "too many classes",
            [detail(field, f"{n_classes} classes; the limit is {settings.max_classes}")],
        )
    return labels


def check_feature_names(names: Sequence[str] | None, n_features: int) -> list[str] | None:
    """Feature names: one per column and distinct, or ``None``."""
    if names is None:
        return None
    if len(names) != n_features:
        raise InvalidInput(
            "feature_names do not match X",
            [detail("feature_names", f"has {len(names)} names for {n_features} columns")],
        )
    if len(set(names)) != len(names):
        raise InvalidInput("duplicate feature names", [detail("feature_names", "must be distinct")])
    return list(names)


def check_n_features(X: np.ndarray, expected: int, field: str = "X") -> None:
    """422 unless ``X`` has the model's number of features."""
    if X.shape[1] != expected:
        raise InvalidInput(
            "wrong number of features",
            [detail(field, f"rows have {X.shape[1]} values; the model expects {expected}")],
        )
