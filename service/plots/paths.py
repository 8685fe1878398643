"""The EM/ECME regularisation path over ν (computed at training time, see
``service.plots.data``): its JSON view and its plot."""

from __future__ import annotations

from typing import Any

import numpy as np

from service.model_types import model_types
from service.plots.canvas import (
    feature_names,
    figure_png,
    problem_labels,
    stored_plot_data,
    text,
)
from service.plots.problems import is_pairwise, problem_classes, problem_titles

FIGSIZE = (11.0, 4.5)
PATH_TYPES = " and ".join(t for t, spec in model_types().items() if spec.nu_path)
MAX_LEGEND = 12


def path_view(record: dict[str, Any]) -> dict[str, Any]:
    """The path as ``GET /models/{ref}/path`` answers it."""
    path = stored_plot_data(
        record, "path", f"paths over nu exist for {PATH_TYPES}, not {record['model_type']}"
    )
    return {
        "model_id": record["model_id"],
        "alpha": path["alpha"],
        "fitted_nu": path["nu"][path["fitted_index"]],
        "fitted_index": path["fitted_index"],
        "nu": path["nu"],
        "log10_nu": path["log10_nu"],
        "norm": path["norm"],
        "feature_names": feature_names(record),
        "classes": problem_labels(record),
        "versus": [versus for _, versus in problem_classes(record)]
        if is_pairwise(record)
        else None,
        "coef": path["coef"],
        "coef_std": path["coef_std"],
        "intercept": path["intercept"],
    }


def path_png(record: dict[str, Any], scale: str) -> bytes:
    """‖β‖ (standardised) and every coefficient against log10 ν; the fitted ν marked."""
    view = path_view(record)
    x = np.asarray(view["log10_nu"])
    coef = np.asarray(view["coef_std" if scale == "standardised" else "coef"])
    names, labels = view["feature_names"], problem_titles(record)
    fitted = x[view["fitted_index"]]

    def draw(fig: Any) -> None:
        left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        left.plot(x, view["norm"], marker=".", color="k")
        left.set_ylabel("‖β‖ (standardised)")
        for p, label in enumerate(labels):
            for j, name in enumerate(names):
                tag = name if len(labels) == 1 else f"{label}: {name}"
                right.plot(x, coef[:, p, j], linewidth=1.0, label=text(tag))
        right.set_ylabel(f"coefficient ({scale})")
        if coef.shape[1] * coef.shape[2] <= MAX_LEGEND:
            right.legend(loc="best", fontsize="small")
        for ax in (left, right):
            ax.axvline(fitted, color="C3", linestyle="--", linewidth=1.0)
            ax.set_xlabel("log10 ν")
        fig.suptitle(text(f"{record['name']} v{record['version']}: EM path, α = "
                          f"{view['alpha']:g}, fitted ν = {view['fitted_nu']:.4g} (dashed)"))  # fmt: skip

    return figure_png(draw, FIGSIZE)
