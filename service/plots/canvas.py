"""One PNG from one drawing function: a fresh ``Figure`` on an Agg canvas (no pyplot, no globals)."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from service.errors import Conflict, detail

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
PENDING_S = 3600.0
"""Plot data still pending after this was lost with its server (computed once, never again)."""
RETRY_AFTER_S = 2
"""``Retry-After`` of a 409 for plot data still being computed."""


def figure_png(draw: Callable[[Figure], None], figsize: tuple[float, float]) -> bytes:
    """Call ``draw(fig)`` on a new figure and return it as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    try:
        draw(fig)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        return buffer.getvalue()
    finally:
        fig.clear()


def text(name: Any) -> str:
    """A user-given name as literal text (``$`` would start matplotlib's mathtext)."""
    return str(name).replace("$", r"\$")


def being_computed(record: dict[str, Any], key: str, now: float | None = None) -> bool:
    """Whether ``record``'s ``key`` plot data is pending and not yet given up (``PENDING_S``)."""
    value = (record.get("plot_data") or {}).get(key)
    if not (isinstance(value, dict) and value.get("pending")):
        return False
    return (time.time() if now is None else now) - float(value.get("since", 0.0)) <= PENDING_S


def stored_plot_data(record: dict[str, Any], key: str, why: str) -> Any:
    """``record["plot_data"][key]``, or 409 saying ``why`` it is missing."""
    value = (record.get("plot_data") or {}).get(key)
    if value is None:
        raise Conflict(
            f"model {record['model_id']} has no {key} data: {why}", [detail("model", why)]
        )
    if isinstance(value, dict) and value.get("pending"):
        stopped = not being_computed(record, key)
        why = (
            "its server stopped before it was computed; train the model again"
            if stopped
            else "it is computed after the model is stored; retry in a few seconds"
        )
        raise Conflict(
            f"the {key} data of model {record['model_id']} is not ready: {why}",
            [detail("model", why)],
            headers={} if stopped else {"Retry-After": str(RETRY_AFTER_S)},
        )
    if isinstance(value, dict) and "error" in value:
        raise Conflict(
            f"the {key} data of model {record['model_id']} could not be computed at training time",
            [detail("model", str(value["error"]))],
        )
    return value


def feature_names(record: dict[str, Any]) -> list[str]:
    """The record's feature names, or ``x0, x1, ...``."""
    return record.get("feature_names") or [f"x{j}" for j in range(int(record["n_features"]))]


def problem_labels(record: dict[str, Any]) -> list[Any]:
    """The class of each one-vs-rest problem: ``classes[1]`` for two classes, else every class."""
    classes = record["classes"]
    return classes[1:] if len(classes) == 2 else classes
