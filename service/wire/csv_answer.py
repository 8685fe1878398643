"""Our outputs as CSV text: what ``csv.writer`` writes, a column at a time where that is plain.

``csv.writer`` makes a list per row and looks at every cell; 100,000 one-cell rows took 0.1 s,
three times the JSON answer. Here each output column becomes its text at once (a float's
``repr``, an integer's or boolean's ``str``, a string as it is) and the lines are joined, when
every column is plain: all floats, all integers or booleans, or strings none of which is empty or
holds a comma, a quote or a line end (``csv.writer`` would quote those). Any other column, and
the header, go through ``csv.writer``, so the text is always the one it writes.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from service.schemas.outputs import INTERVAL_COLUMNS, POINT_OUTPUTS, column_names
from service.wire.answer import Answer
from service.wire.media import CSV_MEDIA_TYPE

_QUOTED = (",", '"', "\n", "\r")


def _columns_of(values: list[Any], prefix: str, classes: Sequence[Any]) -> tuple[list[str], list]:
    """Header names and columns of one output: 1-D → one column, 2-D → one per class."""
    if values and isinstance(values[0], list):
        return column_names(prefix, classes, True), [list(c) for c in zip(*values, strict=True)]
    return column_names(prefix, classes, False), [values]


def output_columns(out: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Our outputs as a header and one list per column.

    Columns: ``label``; ``decision_<class>`` (one column, for the second class, when binary);
    ``probability_<class>``; ``interval_lower``/``interval_upper`` (``_<class>`` when K > 2,
    ``_<class>_vs_<class>`` per pair of a one-vs-one model).
    """
    classes = out["classes"]
    parts: list[tuple[list[str], list]] = []
    for spec in POINT_OUTPUTS:
        if out.get(spec.key) is not None:
            parts.append(_columns_of(out[spec.key], spec.short, classes))
    intervals = out.get("intervals")
    if intervals is not None:
        pairs = intervals.get("problems")  # one-vs-one: named as plots.problems names them
        columns = classes if pairs is None else [f"{a}_vs_{b}" for a, b in pairs]
        for bound, prefix in zip(("lower", "upper"), INTERVAL_COLUMNS, strict=True):
            parts.append(_columns_of(intervals[bound], prefix, columns))
    header = [name for names, _ in parts for name in names]
    return header, [column for _, cols in parts for column in cols]


def table(out: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Our outputs as a header and one row per input row (the rows of ``output_columns``)."""
    header, cols = output_columns(out)
    return header, [list(row) for row in zip(*cols, strict=True)]


def _cells(column: list[Any]) -> list[str] | None:
    """The text of each cell of ``column`` when the column is plain (module docstring), else None."""
    if not column:
        return []
    kinds = {type(value) for value in column}
    if kinds == {float}:
        return list(map(float.__repr__, column))
    if kinds <= {int, bool}:
        return list(map(str, column))
    if kinds == {str}:
        distinct = set(column)
        if all(text and not any(mark in text for mark in _QUOTED) for text in distinct):
            return column
    return None


def csv_text(out: Mapping[str, Any]) -> str:
    """``out`` as CSV: a header row, then one row per input row (``output_columns``)."""
    header, columns = output_columns(out)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    cells = [_cells(column) for column in columns]
    if columns and all(column is not None for column in cells):
        lines = cells[0] if len(cells) == 1 else map(",".join, zip(*cells, strict=True))
        return buffer.getvalue() + "\n".join(lines) + "\n"
    rows = zip(*columns, strict=True)
    writer.writerows([repr(v) if isinstance(v, float) else v for v in row] for row in rows)
    return buffer.getvalue()


def answer(out: Mapping[str, Any]) -> Answer:
    """``out`` as ``text/csv``, naming the model in ``X-Model-ID`` and ``X-Model-Version``."""
    headers = {"X-Model-ID": out["model_id"], "X-Model-Version": str(out["version"])}
    return Answer(csv_text(out).encode(), CSV_MEDIA_TYPE, headers)
