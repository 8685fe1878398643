"""A Bayesian model's coefficients against a linear SVM's at C = ν² (fitted at training time, see
``service.plots.data``), with credible intervals as error bars when there are draws. Only the ``MAX_LABELS`` largest
coefficients of each problem (by the larger of the two magnitudes) carry their names, so a model
with many features does not pile its labels up near 0."""

from __future__ import annotations

from typing import Any

import numpy as np

from service.plots.canvas import (
    feature_names,
    figure_png,
    stored_plot_data,
    text,
)
from service.plots.problems import problem_titles

FIGSIZE = (6.5, 6.0)
MAX_LABELS = 10


def labelled(svm: np.ndarray, bayes: np.ndarray) -> np.ndarray:
    """Indices of the ``MAX_LABELS`` largest coefficients of one problem, largest first."""
    size = np.maximum(np.abs(svm), np.abs(bayes))
    return np.argsort(-size, kind="stable")[:MAX_LABELS]


def intervals(estimator: Any, scale: str, level: float) -> np.ndarray | None:
    """(2, problems, features) equal-tailed credible bounds from the draws, or None without."""
    if not hasattr(estimator, "coef_draws_"):
        return None
    draws = np.asarray(estimator.coefficient_draws(scale))[..., 1:]  # drop the intercept
    q = [(1 - level) / 2, (1 + level) / 2]
    return np.quantile(draws, q, axis=(1, 2))


def compare_png(record: dict[str, Any], estimator: Any, scale: str, level: float) -> bytes:
    """Scatter of (linear SVM, Bayesian) coefficient pairs with the diagonal y = x."""
    stored = stored_plot_data(
        record, "compare", f"a comparison exists for Bayesian models, not {record['model_type']}"
    )
    std = scale == "standardised"
    svm = np.asarray(stored["coef_std" if std else "coef"])
    bayes = np.asarray(estimator.coef_std_ if std else estimator.coef_)
    bounds = intervals(estimator, scale, level)
    names, labels = feature_names(record), problem_titles(record)
    alpha = float(record["params"].get("alpha", 1.0))

    def draw(fig: Any) -> None:
        ax = fig.add_subplot(1, 1, 1)
        for p, label in enumerate(labels):
            kw = {"label": text(label)} if len(labels) > 1 else {}
            if bounds is not None:
                err = np.abs(bounds[:, p, :] - bayes[p])
                ax.errorbar(svm[p], bayes[p], yerr=err, fmt="o", markersize=4, capsize=2, **kw)
            else:
                ax.plot(svm[p], bayes[p], "o", markersize=5, **kw)
            for j in labelled(svm[p], bayes[p]):
                ax.annotate(text(names[j]), (svm[p, j], bayes[p, j]), fontsize="x-small",
                            xytext=(3, 3), textcoords="offset points")  # fmt: skip
        values = np.concatenate([svm.ravel(), bayes.ravel()])
        lo, hi = float(values.min()), float(values.max())
        pad = 0.05 * (hi - lo) or 1.0
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "--", color="0.5", linewidth=0.8)
        ax.set_xlabel(f"linear SVM at C = ν² ({scale})")
        ax.set_ylabel(f"{record['model_type']} ({scale})")
        if len(labels) > 1:
            ax.legend(loc="best", fontsize="small")
        bars = f", {level:.0%} intervals" if bounds is not None else ""
        few = f"; the {MAX_LABELS} largest named" if svm.shape[1] > MAX_LABELS else ""
        ax.set_title(text(f"{record['name']} v{record['version']}: α = {alpha:g}{bars}{few}"))

    return figure_png(draw, FIGSIZE)
