"""Decision regions of a model on two features, the others held at their training means.

The grid spans each chosen feature's training min..max (5% margin). Regions: the predicted class.
Lines: binary SVMs (linear, kernel, Bayesian) draw the decision = 0 boundary and the margins
decision = ±1; LDA, QDA and every multiclass model draw the boundaries between predicted classes.
Support vectors are circled for kernel SVMs fitted on exactly these two features (with more
features a support vector's position in the plane would be a projection, so none are drawn).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from service.errors import Conflict, InvalidInput, detail
from service.model_types import model_types
from service.plots.canvas import feature_names, figure_png, text

FIGSIZE = (7.0, 6.0)
MAX_GRID = 150
MIN_GRID = 20
GRID_BUDGET = 20_000_000
"""Grid points × features evaluated at most (memory of one plot)."""
MODEL_TYPES = model_types()


def feature_index(record: dict[str, Any], value: str, field: str) -> int:
    """A feature by name, or by 0-based index (a name wins); 422 naming ``field`` otherwise."""
    names = feature_names(record)
    if value in names:
        return names.index(value)
    if value.isdigit() and int(value) < len(names):
        return int(value)
    raise InvalidInput(
        "unknown feature", [detail(field, f"not a feature name or an index below {len(names)}")]
    )


def grid_size(n_features: int) -> int:
    """Points per axis: ``MAX_GRID`` unless the grid would exceed ``GRID_BUDGET`` values."""
    return int(max(MIN_GRID, min(MAX_GRID, np.sqrt(GRID_BUDGET / max(n_features, 1)))))


def plane(record: dict[str, Any], i: int, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grid axes of features ``i`` and ``j`` and the rows (others at their means)."""
    means, lows, highs = (record.get(k) for k in ("feature_means", "feature_min", "feature_max"))
    if means is None or lows is None or highs is None:
        raise Conflict(
            f"model {record['model_id']} has no feature statistics",
            [detail("model", "it was stored before feature means were recorded; retrain it")],
        )
    n = grid_size(len(means))
    axes = []
    for k in (i, j):
        pad = 0.05 * (highs[k] - lows[k]) or 1.0
        axes.append(np.linspace(lows[k] - pad, highs[k] + pad, n))
    gx, gy = np.meshgrid(*axes)
    rows = np.tile(np.asarray(means, dtype=np.float64), (gx.size, 1))
    rows[:, i], rows[:, j] = gx.ravel(), gy.ravel()
    return gx, gy, rows


def lines_drawn(decision: np.ndarray | None) -> str:
    """What the title says the black lines are: the margins only where they fall in the window."""
    if decision is None:
        return "class boundaries"
    lo, hi = float(decision.min()), float(decision.max())
    shown = [m for m in (-1.0, 1.0) if lo < m < hi]
    if len(shown) == 2:
        return "decision 0 and margins ±1"
    if shown:
        return f"decision 0 and margin {shown[0]:+g} (the other is outside this window)"
    return "decision 0 (the margins ±1 are outside this window)"


def boundary_png(record: dict[str, Any], estimator: Any, x: str | None, y: str | None) -> bytes:
    """Regions, boundaries, margins and support vectors (see the module notes) as PNG."""
    if int(record["n_features"]) < 2:
        raise Conflict(
            "a decision-region plot needs two features",
            [detail("model", "the model has one feature")],
        )
    i = feature_index(record, x, "x") if x is not None else 0
    j = feature_index(record, y, "y") if y is not None else 1
    if i == j:
        raise InvalidInput("x and y are the same feature", [detail("y", "choose another feature")])
    gx, gy, rows = plane(record, i, j)
    classes = estimator.classes_
    predicted = np.searchsorted(classes, estimator.predict(rows)).reshape(gx.shape)
    binary = classes.size == 2
    spec = MODEL_TYPES.get(record["model_type"])
    margins = binary and spec is not None and spec.margins
    decision = np.asarray(estimator.decision_function(rows)).reshape(gx.shape) if margins else None
    names = feature_names(record)
    others = int(record["n_features"]) > 2

    def draw(fig: Any) -> None:
        ax = fig.add_subplot(1, 1, 1)
        levels = np.arange(classes.size + 1) - 0.5
        filled = ax.contourf(gx, gy, predicted, levels=levels, cmap="tab10", alpha=0.35,
                             vmin=0, vmax=9)  # fmt: skip
        if decision is not None:
            ax.contour(gx, gy, decision, levels=[-1.0, 0.0, 1.0], colors="k",
                       linestyles=["--", "-", "--"], linewidths=[1.0, 1.6, 1.0])  # fmt: skip
        elif classes.size > 1:
            ax.contour(gx, gy, predicted, levels=levels[1:-1], colors="k", linewidths=1.4)
        sv = getattr(estimator, "support_vectors_", None)
        if sv is not None and not others:
            ax.scatter(sv[:, i], sv[:, j], s=60, facecolors="none", edgecolors="k",
                       linewidths=1.0, label=f"support vectors ({len(sv)})")  # fmt: skip
            ax.legend(loc="upper right", fontsize="small")
        bar = fig.colorbar(filled, ax=ax, ticks=np.arange(classes.size))
        bar.ax.set_yticklabels([text(c) for c in classes.tolist()])
        ax.set_xlabel(text(names[i]))
        ax.set_ylabel(text(names[j]))
        lines = lines_drawn(decision)
        held = "; other features at their training means" if others else ""
        ax.set_title(text(f"{record['name']} v{record['version']}: {lines}{held}"),
                     fontsize="medium")  # fmt: skip

    return figure_png(draw, FIGSIZE)
