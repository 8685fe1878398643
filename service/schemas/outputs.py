"""The table of prediction outputs: every name, method and wire spelling of an output, in one place.

A request names an output by its response key (``predictions``) or, deprecated but accepted, by
its short name (``label``), which is also its V2 tensor name and its CSV column prefix. A point
output comes from one estimator method per row; ``intervals`` are computed on their own. Every
codec and the scoring loop read this table, so a new output is a row here plus what is special
about its values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OutputSpec:
    """One prediction output."""

    key: str
    """The response key, and the name a request should use."""
    short: str
    """Former request name (still accepted), V2 tensor name and CSV column prefix."""
    method: str | None
    """Estimator method giving it row by row; ``None``: not a point output (intervals)."""
    labels: bool = False
    """Class labels (kept as they are) rather than floats."""
    needs: str | None = None
    """Estimator attribute a model must have to give it (``None``: every model)."""


OUTPUTS = (
    OutputSpec("predictions", "label", "predict", labels=True),
    OutputSpec("decision_function", "decision", "decision_function"),
    OutputSpec("probabilities", "probability", "predict_proba", needs="predict_proba"),
    OutputSpec("intervals", "interval", None, needs="predict_interval"),
)
POINT_OUTPUTS = tuple(spec for spec in OUTPUTS if spec.method is not None)
BY_SHORT = {spec.short: spec for spec in OUTPUTS}
SHORT_NAMES = {spec.key: spec.short for spec in OUTPUTS}
"""Response key → short name (the scoring loop's name for each output)."""
DEPRECATED_OUTPUTS = {spec.short: spec.key for spec in OUTPUTS}
"""Former names of the outputs, kept working: each asks for the response key it maps to."""
OUTPUT_NAMES = tuple(spec.key for spec in OUTPUTS) + tuple(spec.short for spec in OUTPUTS)
INTERVAL_COLUMNS = ("interval_lower", "interval_upper")
"""Column prefixes of an interval's two bounds in tables (CSV answers, batch output files)."""


def column_names(prefix: str, classes: Sequence[Any], per_class: bool) -> list[str]:
    """The table columns of one output: ``<prefix>_<class>`` per class when ``per_class`` (2-D
    values), else one column: ``prefix``, or ``decision_<classes[1]>`` for a binary decision
    (positive means that class). CSV answers and batch output files are named by this."""
    if per_class:
        return [f"{prefix}_{c}" for c in classes]
    return [f"{prefix}_{classes[-1]}" if prefix == "decision" else prefix]
