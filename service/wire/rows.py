"""Rows of features pulled out of a body, the 422 every decoder raises, and number checks.

Pure functions; every failure is a 422 (``InvalidInput``) naming the field as the sender wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from service.errors import InvalidInput, detail
from service.inference.query import PredictQuery


@dataclass(frozen=True)
class Rows:
    """Rows of features pulled out of a foreign body, and where in that body they were."""

    X: list[list[float]] | np.ndarray
    feature_names: list[str] | None
    field: str
    names_field: str


def invalid(field: str, problem: str, message: str = "the body is not valid") -> InvalidInput:
    return InvalidInput(message, [detail(field, problem)])


def number(value: Any, field: str) -> float:
    """A JSON number as a float (422 for strings, booleans, null or overflowing integers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(field, "must be a number", "values must be numbers")
    try:
        return float(value)
    except OverflowError:
        raise invalid(field, "is too large for a double", "values must be numbers") from None


def rows_list(value: Any, field: str, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise invalid(field, f"must be a list of {what}")
    if not value:
        raise invalid(field, "must hold at least one row", "no rows were sent")
    return value


def matrix(rows: Any, field: str) -> list[list[float]]:
    """A list of rows of numbers as floats; ``field[i][j]`` names a bad cell."""
    out = []
    for i, row in enumerate(rows_list(rows, field, "rows")):
        if not isinstance(row, list):
            raise invalid(f"{field}[{i}]", "must be a list of numbers (one row)")
        out.append([number(v, f"{field}[{i}][{j}]") for j, v in enumerate(row)])
    return out


def query_of(
    rows: Rows, model: str, outputs: list[str] | None, model_field: str = "model"
) -> PredictQuery:
    """The query for ``rows`` of a foreign body scored with model ``model``."""
    return PredictQuery(
        model=model,
        X=rows.X,
        feature_names=rows.feature_names,
        outputs=outputs,
        model_field=model_field,
        x_field=rows.field,
        names_field=rows.names_field,
    )
