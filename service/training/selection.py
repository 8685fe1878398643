"""The worker's model selection before the final fit: the grid search, then cross-validation.

Progress: every candidate × fold fit and every CV fold counts the same; together they fill the
worker's 0.15..0.85 band (the final fit then reports only its end, 0.9).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.training.crossval import cross_validate, grid_search, step_params

BAND = (0.15, 0.85)


def run_model_selection(
    task: Any, estimator: Any, report: Callable[[float], None], n_jobs: int = 1
) -> dict[str, Any]:
    """``{"search": ..., "cv": ...}`` for the task's ``search`` and ``cv`` (those requested)."""
    search, cv = task.search, task.cv
    n_search = len(search["candidates"]) * search["k"] if search else 0
    total = n_search + (cv["k"] if cv else 0)
    low, high = BAND

    def scaled(offset: int, size: int) -> Callable[[float], None]:
        return lambda f: report(low + (high - low) * (offset + f * size) / total)

    out: dict[str, Any] = {}
    if search:
        out["search"] = grid_search(
            estimator, task.X, task.y, search["grid"], search["scoring"], search["k"],
            search["random_state"], n_jobs=n_jobs, progress=scaled(0, n_search),
        )  # fmt: skip
        best = step_params(estimator, out["search"]["best_params"])
        estimator = estimator.set_params(**best)
    if cv:
        out["cv"] = cross_validate(
            estimator, task.X, task.y, cv["k"], cv["random_state"], n_jobs=n_jobs,
            progress=scaled(n_search, cv["k"]),
        )  # fmt: skip
    return out
