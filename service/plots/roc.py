"""ROC curves of a cross-validated model's folds, from the points stored at training time.

Binary: the curve of ``classes[1]`` from decision values. Multiclass: the macro one-vs-rest curve
(TPR averaged over classes on a common FPR grid; AUC the mean of the per-class AUCs), see
``service.training.crossval``. The mean curve averages the folds' TPR on a 101-point FPR grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from service.errors import Conflict, detail
from service.plots.canvas import figure_png, stored_plot_data, text

FIGSIZE = (6.5, 6.0)


def mean_curve(folds: list[dict[str, Any]], points: int = 101) -> tuple[np.ndarray, np.ndarray]:
    """Vertical average of the folds' curves: TPR interpolated at ``points`` FPR values."""
    grid = np.linspace(0.0, 1.0, points)
    tpr = np.mean([np.interp(grid, f["fpr"], f["tpr"]) for f in folds], axis=0)
    tpr[0] = 0.0
    return grid, tpr


def roc_png(record: dict[str, Any]) -> bytes:
    """Each fold's ROC curve, the mean curve and the chance diagonal, AUCs in the legend."""
    stored = stored_plot_data(
        record, "roc", "it was trained without cross-validation (train with evaluation.cv)"
    )
    folds = [f for f in stored if f is not None]
    if not folds:
        raise Conflict(
            f"model {record['model_id']} has no ROC curves",
            [detail("model", "its folds gave no scores (no decision values or probabilities)")],
        )
    classes = record["classes"]
    what = f"positive class {classes[1]}" if len(classes) == 2 else "macro one-vs-rest"
    aucs = np.array([f["auc"] for f in folds])

    def draw(fig: Any) -> None:
        ax = fig.add_subplot(1, 1, 1)
        for i, fold in enumerate(stored, start=1):
            if fold is not None:
                ax.plot(fold["fpr"], fold["tpr"], linewidth=0.9, alpha=0.6,
                        label=f"fold {i} (AUC {fold['auc']:.3f})")  # fmt: skip
        grid, tpr = mean_curve(folds)
        ax.plot(grid, tpr, color="k", linewidth=2.0,
                label=f"mean (AUC {aucs.mean():.3f} ± {aucs.std():.3f})")  # fmt: skip
        ax.plot([0, 1], [0, 1], linestyle="--", color="0.6", linewidth=0.8)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.01)
        ax.set_xlabel("false positive rate")
        ax.set_ylabel("true positive rate")
        ax.set_title(
            text(f"{record['name']} v{record['version']}: ROC, {what}, {len(stored)} folds")
        )
        ax.legend(loc="lower right", fontsize="small")

    return figure_png(draw, FIGSIZE)
