"""Bodies of ``POST /predict``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.common import Matrix
from service.schemas.outputs import DEPRECATED_OUTPUTS, OUTPUT_NAMES

Output = Literal[OUTPUT_NAMES]  # type: ignore[valid-type]
Label = int | str
MODEL_REF_MAX_CHARS = 140
"""Longest model reference ``POST /predict`` takes (``model``)."""
MAX_OUTPUTS = 8
"""Most entries of ``outputs``."""
DEFAULT_LEVEL = 0.95
"""Credible level of intervals when a request gives none (predict, posterior, plots)."""


class PredictRequest(BaseModel):
    """Rows to score with one stored model."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: str = Field(
        min_length=1,
        max_length=MODEL_REF_MAX_CHARS,
        description="A model id, a name (its latest version), `name@alias` or `name:version`.",
        examples=["iris-demo", "iris-demo@stable", "iris-demo:2"],
    )
    X: Matrix = Field(description="Rows of features, in the order of the model's features.")
    outputs: list[Output] = Field(
        default_factory=lambda: ["predictions"],
        min_length=1,
        max_length=MAX_OUTPUTS,
        description="The response keys to fill: `predictions`, `decision_function`, "
        "`probabilities` (a model with probabilities), `intervals` (a model with posterior "
        "draws). Deprecated, still accepted: `label`, `decision`, `probability`, `interval`.",
        json_schema_extra={"x-deprecated-values": sorted(DEPRECATED_OUTPUTS)},
    )
    level: float = Field(
        DEFAULT_LEVEL, gt=0.0, lt=1.0, description="Credible level of `intervals`."
    )
    feature_names: list[str] | None = Field(
        None, description="Column names of X; when given, columns are reordered to the model's."
    )


class Interval(BaseModel):
    """Equal-tailed credible interval of the decision value x'β per row; with K > 2 classes one per
    binary problem: per class (one-vs-rest, in `classes` order) or per pair of classes
    (one-vs-one, in `problems` order)."""

    level: float
    lower: list[float] | list[list[float]]
    upper: list[float] | list[list[float]]
    problems: list[list[Label]] | None = Field(
        None,
        description="One-vs-one with K > 2: the (positive, negative) classes of each column.",
    )


class PredictResponse(BaseModel):
    """What was asked for in ``outputs``; the other fields are null."""

    model_config = ConfigDict(protected_namespaces=())

    model_id: str
    name: str
    version: int
    classes: list[Label] = Field(description="Column order of per-class outputs.")
    predictions: list[Label] | None = None
    decision_function: list[float] | list[list[float]] | None = Field(
        None, description="Binary: one value per row, > 0 means classes[1]. Else one per class."
    )
    probabilities: list[list[float]] | None = None
    intervals: Interval | None = None
    dropped_columns: list[str] = Field(
        default_factory=list,
        description="Columns sent (named by feature_names or the CSV header) that the model does "
        "not use and that were left out, e.g. its target column; empty when every column was used.",
    )
