"""The binary problems of a stored model, read from its record: one per class (one-vs-rest), one
per pair of classes (one-vs-one) or one (two classes), in the core's order
(``bsvm_core.multiclass.binary_problems``): the rows of a Bayesian model's coefficients, draws
and decision-value intervals."""

from __future__ import annotations

from typing import Any

from bsvm_core.multiclass import binary_problems
from bsvm_core.multiclass import problem_classes as labels_of


def problem_classes(record: dict[str, Any]) -> list[tuple[Any, Any | None]]:
    """(class, versus) of each problem: versus None for one-vs-rest and for two classes (whose
    one problem is ``classes[1]`` against ``classes[0]``). Records without a ``multiclass``
    parameter are one-vs-rest (every Bayesian model stored before one-vs-one existed)."""
    classes = list(record["classes"])
    scheme = (record.get("params") or {}).get("multiclass", "ovr")
    return labels_of(classes, binary_problems(len(classes), scheme))


def is_pairwise(record: dict[str, Any]) -> bool:
    """Whether the model's problems are pairs of classes (one-vs-one with more than two)."""
    return any(versus is not None for _, versus in problem_classes(record))


def problem_titles(record: dict[str, Any]) -> list[str]:
    """A label for each problem in plots and table columns: the class, or ``a vs b``."""
    return [
        str(label) if versus is None else f"{label} vs {versus}"
        for label, versus in problem_classes(record)
    ]


def interval_columns(record: dict[str, Any]) -> list[Any]:
    """What names the interval columns of tables (``column_names``' classes): the classes, or
    ``a_vs_b`` for each pair of a one-vs-one model."""
    if not is_pairwise(record):
        return list(record["classes"])
    return [f"{label}_vs_{versus}" for label, versus in problem_classes(record)]
