"""The one typed query every wire format is decoded into: which model, which rows, which outputs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from service.errors import ErrorDetail
from service.schemas.predict import DEFAULT_LEVEL

DEFAULT_OUTPUTS = ("predictions",)
"""Outputs of our own bodies when a request names none."""


@dataclass(slots=True)
class PredictQuery:
    """One request for predictions, whatever body it came in.

    ``outputs`` are response keys or their short names (``label``, ``decision``, ...); ``None``
    asks for every point output the model has (V2 requests without ``outputs``). The ``*_field``
    names say where the sender wrote each part, so errors name the sender's own fields.
    """

    model: str
    X: np.ndarray | list[list[float]]
    feature_names: list[str] | None = None
    outputs: list[str] | None = None
    level: float = DEFAULT_LEVEL
    model_field: str = "model"
    x_field: str = "X"
    names_field: str = "feature_names"

    def with_model(self, model_id: str, outputs: list[str]) -> PredictQuery:
        """This query for the resolved ``model_id`` and the outputs to compute."""
        return replace(self, model=model_id, outputs=outputs)

    def sender_details(self, details: Sequence[ErrorDetail]) -> list[ErrorDetail]:
        """Details naming our fields (``X[i][j]``, ``feature_names``) named as the sender wrote them."""
        out = []
        for d in details:
            field = d.field
            if field == "X" or field.startswith("X["):
                field = self.x_field + field[1:]
            elif field == "feature_names" and self.names_field:
                field = self.names_field
            out.append(ErrorDetail(field=field, problem=d.problem))
        return out


def rows_shape(query: PredictQuery) -> tuple[int, int]:
    """(rows, features) of the query's ``X`` (0 features for an empty or ragged list)."""
    X: Any = query.X
    if isinstance(X, np.ndarray):
        return (X.shape[0], X.shape[1] if X.ndim == 2 else 0)
    return (len(X), len(X[0]) if X and isinstance(X[0], list) else 0)
