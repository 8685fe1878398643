"""Checks of ``evaluation.cv`` and ``search`` in a train request (422 before any work)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import ValidationError

from service.errors import InvalidInput, detail, unknown_name
from service.model_types import ModelSpec
from service.training.crossval import DEFAULT_SEARCH_K, MAX_CANDIDATES, MAX_VALUES


def check_folds(y: np.ndarray, k: int, field: str) -> None:
    """Every class needs at least ``k`` rows for stratified k-fold (422 on ``field``)."""
    smallest = int(np.unique(y, return_counts=True)[1].min())
    if smallest < k:
        raise InvalidInput(
            "too few rows per class for the folds",
            [detail(field, f"{k} folds need at least {k} rows of every class; the smallest "
                           f"class has {smallest} (in the training split)")],
        )  # fmt: skip


def _validated(spec: ModelSpec, params: dict[str, Any], values: dict[str, Any], field: str) -> Any:
    """The params model's dump of ``params`` updated with ``values`` (422 naming ``field``)."""
    try:
        return spec.params_model.model_validate({**params, **values}).model_dump()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InvalidInput("invalid search value", [detail(field, problems[:500])]) from None


def check_search(
    spec: ModelSpec, params: dict[str, Any], search: dict[str, list[Any]]
) -> dict[str, list[Any]]:
    """The grid with every value validated against the model type's bounds (422 otherwise)."""
    fields = spec.params_model.model_fields
    if not search:
        raise InvalidInput("empty search", [detail("search", "name at least one parameter")])
    grid: dict[str, list[Any]] = {}
    for key, values in search.items():
        if key not in fields:
            raise InvalidInput(
                "unknown search parameter",
                [
                    detail(
                        f"search.{key}", unknown_name(key, fields, spec.params_model.hints.get(key))
                    )
                ],
            )
        if not 1 <= len(values) <= MAX_VALUES:
            raise InvalidInput(
                "too many search values",
                [detail(f"search.{key}", f"give 1 to {MAX_VALUES} values")],
            )
        grid[key] = [
            _validated(spec, params, {key: v}, f"search.{key}[{i}]")[key]
            for i, v in enumerate(values)
        ]
    n = math.prod(len(v) for v in grid.values())
    if n > MAX_CANDIDATES:
        raise InvalidInput(
            "too many search candidates",
            [detail("search", f"{n} combinations; at most {MAX_CANDIDATES}")],
        )
    return grid


def selection_plan(
    request: Any, spec: ModelSpec, params: dict[str, Any], y: np.ndarray, seed: int
) -> tuple[dict[str, int] | None, dict[str, Any] | None]:
    """The worker's ``cv`` and ``search`` entries of a checked request (y: the training rows)."""
    k = request.evaluation.cv if request.evaluation is not None else None
    cv = None
    if k is not None:
        check_folds(y, k, "evaluation.cv")
        cv = {"k": k, "random_state": seed}
    if request.search is None:
        return cv, None
    from service.training.crossval import candidates

    grid = check_search(spec, params, request.search)
    cands = candidates(grid)
    for i, c in enumerate(cands):  # combinations may break rules no single value does
        _validated(spec, params, c, f"search (combination {i})")
    search_k = k or DEFAULT_SEARCH_K
    check_folds(y, search_k, "evaluation.cv" if k else "search")
    search = {"grid": grid, "candidates": cands, "scoring": request.search_scoring,
              "k": search_k, "random_state": seed}  # fmt: skip
    return cv, search


def timeout_detail(search: dict[str, Any] | None, cv: dict[str, int] | None) -> Any:
    """What to lower when a training ran past ``BSVM_TRAIN_TIMEOUT_S``: the search's size when one
    ran (candidates × folds, plus the final fit and any cross-validation of it), else the data."""
    if not search:
        return detail("X", "fit took too long: send fewer rows or lower max_iter")
    n, k = len(search["candidates"]), int(search["k"])
    fits = n * k + 1 + (int(cv["k"]) if cv else 0)
    return detail(
        "search",
        f"fit took too long: the search fits {n} candidates on {k} folds, {fits} fits in all; "
        "search fewer values or folds, send fewer rows or lower max_iter",
    )
