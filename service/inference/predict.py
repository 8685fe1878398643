"""Scoring rows with a stored model: the one scoring call of every predict and batch file."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from service.data_checks import as_matrix, check_feature_names, check_n_features
from service.errors import Conflict, InvalidInput, detail
from service.inference.batching import MicroBatcher
from service.inference.limits import PredictGate, give_back_memory, row_bytes, score_in_blocks
from service.inference.query import PredictQuery
from service.inference.scoring import Scorer, scorer
from service.inference.servable import Servable, servable
from service.inference.signature import outputs_of
from service.model_types import model_types_with
from service.plots.problems import is_pairwise, problem_classes
from service.repository.store import ModelStore
from service.schemas.outputs import POINT_OUTPUTS, SHORT_NAMES
from service.settings import Settings

FLOAT_MAX = float(np.finfo(np.float64).max)
DRAWS = model_types_with("draws")


SMALL_FLOATS = 16
"""Vectors up to this length are made finite in Python (cheaper than ``np.nan_to_num`` there)."""


def _finite(v: float) -> float:
    """v, with NaN as 0 and ±inf as ±the largest double (``np.nan_to_num``'s mapping)."""
    if -FLOAT_MAX <= v <= FLOAT_MAX:
        return v
    return 0.0 if v != v else math.copysign(FLOAT_MAX, v)


def _floats(values: Any) -> list[Any]:
    """An array as nested lists of finite floats (NaN as 0, ±inf clipped to the largest double)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1 and arr.size <= SMALL_FLOATS:
        return [_finite(v) for v in arr.tolist()]
    return np.nan_to_num(arr, nan=0.0, posinf=FLOAT_MAX, neginf=-FLOAT_MAX).tolist()


def _labels(values: Any) -> list[Any]:
    return np.asarray(values).tolist()


def select_columns(
    X: np.ndarray,
    given: Sequence[str] | None,
    expected: Sequence[str] | None,
    target: str | None = None,
) -> tuple[np.ndarray, list[str]]:
    """The model's columns of ``X`` in its order, and the names of the columns left out.

    Columns are matched by name when both ``given`` and ``expected`` are known (422 when one is
    missing); a model without feature names only leaves out its ``target`` column, if sent.
    """
    if given is None or list(given) == list(expected or ()):
        return X, []
    given = check_feature_names(given, X.shape[1])
    if expected is None:
        keep = [j for j, name in enumerate(given) if name != target]
    else:
        missing = sorted(set(expected) - set(given))
        if missing:
            raise InvalidInput(
                "columns do not match the model's features",
                [detail("feature_names", f"missing {missing[:10]}")],
            )
        position = {name: j for j, name in enumerate(given)}
        keep = [position[name] for name in expected]
    kept = set(keep)
    dropped = [name for j, name in enumerate(given) if j not in kept]
    return (X[:, keep] if dropped or keep != list(range(len(given))) else X), dropped


def interval_bounds(
    estimator: Any, X: np.ndarray, level: float, budget: float
) -> tuple[np.ndarray, np.ndarray]:
    """``predict_interval``'s (lower, upper) within ``budget`` bytes; 409 for a model without draws."""
    try:
        lower, upper = estimator.predict_interval(X, level, max_bytes=budget)
    except ValueError as exc:  # e.g. EM/ECME: a mode, no posterior draws
        raise Conflict(
            f"this model cannot give intervals: {exc}",
            [detail("outputs", f"interval needs posterior draws ({DRAWS})")],
        ) from None
    return np.asarray(lower), np.asarray(upper)


def check_outputs(estimator: Any, record: dict[str, Any], model_id: str, outputs: set[str]) -> None:
    """409 when the model cannot give one of ``outputs`` (short names): probabilities, intervals."""
    if "probability" in outputs and not hasattr(estimator, "predict_proba"):
        why = (
            "it was trained without probability=true"
            if "probability" in record.get("params", {})
            else f"{record['model_type']} gives decision values, not probabilities"
        )
        raise Conflict(
            f"model {model_id} has no probabilities ({why}); ask for label or decision",
            [detail("outputs", "probability is not available for this model")],
        )
    if "interval" in outputs and not hasattr(estimator, "predict_interval"):
        raise Conflict(
            f"model {model_id} ({record['model_type']}) has no posterior draws; intervals need "
            f"a model fitted by sampling ({DRAWS})",
            [detail("outputs", "interval is not available for this model")],
        )


def score_arrays(
    estimator: Any, X: np.ndarray, outputs: set[str], level: float, budget: float
) -> dict[str, Any]:
    """The outputs ``outputs`` (short names) of ``estimator`` on the checked matrix ``X``, as
    arrays keyed by short name; ``interval`` is a (lower, upper) pair. Rows are scored in blocks
    within ``budget`` bytes. The numpy core of every predict: ``POST /predict`` and batch files."""
    scorers = {
        spec.short: scorer(estimator, spec.method)
        for spec in POINT_OUTPUTS
        if spec.short in outputs
    }
    per_row = row_bytes(estimator, X.shape[1])
    return scored_blocks(scorers, estimator, X, outputs, level, budget, per_row)


def scored_blocks(
    scorers: dict[str, Scorer],
    estimator: Any,
    X: np.ndarray,
    outputs: set[str],
    level: float,
    budget: float,
    per_row: int,
) -> dict[str, Any]:
    """``score_arrays`` with the estimator's scorers and bytes per row already at hand."""
    scores: dict[str, Any] = {
        short: score_in_blocks(fn, X, per_row, budget)
        for short, fn in scorers.items()
        if short in outputs
    }
    if "interval" in outputs:
        scores["interval"] = interval_bounds(estimator, X, level, budget)
    return scores


def score(
    store: ModelStore,
    settings: Settings,
    gate: PredictGate,
    query: PredictQuery,
    batcher: MicroBatcher | None = None,
    ready: Servable | None = None,
) -> dict[str, Any]:
    """Our outputs for ``query``, whatever wire format it was decoded from: the one scoring call.

    The model reference's 404 names ``query.model_field``; no ``outputs`` asks for every point
    output the model has; 422 details name the fields as the sender wrote them. Holds a slot of
    the ``gate`` (503 when every slot is taken). ``ready``: the ``Servable`` the caller found in
    memory for ``query.model`` (``ModelStore.prepared_in_memory``), or None.
    """
    try:
        if query.outputs is None or query.model_field != "model":
            model_id = store.resolve(query.model, query.model_field)
            outputs = query.outputs
            query = query.with_model(
                model_id, outputs_of(store.load(model_id)) if outputs is None else outputs
            )
            if ready is not None and ready.model_id != model_id:
                ready = None
        with gate.slot():
            return predict(store, settings, query, batcher, ready)
    except InvalidInput as exc:
        exc.details = query.sender_details(exc.details)
        raise


@functools.lru_cache(maxsize=256)
def short_outputs(names: tuple[str, ...]) -> frozenset[str]:
    """The short names (``label``, ...) of outputs named by response key or short name."""
    return frozenset(SHORT_NAMES.get(name, name) for name in names)


def predict(
    store: ModelStore,
    settings: Settings,
    body: PredictQuery,
    batcher: MicroBatcher | None = None,
    ready: Servable | None = None,
) -> dict[str, Any]:
    """The outputs ``body.outputs`` of the model ``body.model`` on ``body.X``.

    With a ``batcher``, a one-row predict is scored together with concurrent ones of the model.
    ``ready``: the ``Servable`` of ``body.model`` as the caller found it in memory
    (``ModelStore.prepared_in_memory``, which resolved the reference), or None.
    """
    model_id = store.resolve(body.model) if ready is None else ready.model_id
    record = store.model_record(model_id)
    X = as_matrix(body.X, settings)
    dropped: list[str] = []
    if body.feature_names is not None:
        X, dropped = select_columns(
            X, body.feature_names, record.get("feature_names"), record.get("target")
        )
    if X.shape[1] != record["n_features"]:
        check_n_features(X, int(record["n_features"]))
    if ready is None:
        ready = servable(store, model_id)
    outputs = short_outputs(tuple(body.outputs))
    if not outputs <= ready.gives:
        check_outputs(ready.estimator, record, model_id, set(outputs))
    out: dict[str, Any] = {**ready.head, "dropped_columns": dropped}
    budget = settings.predict_memory_mb * 2**20
    if (
        batcher is None
        and "interval" not in outputs
        and X.shape[0] * max(ready.per_row, 1) <= budget
    ):
        # point outputs in one block (``scored_blocks``' case of one block): each scorer once
        for key, fn, labels in ready.points(outputs):
            out[key] = (_labels if labels else _floats)(fn(X))
        give_back_memory(X.nbytes)
        return out
    points = outputs - {"interval"}

    def score(rows: np.ndarray) -> dict[str, np.ndarray]:
        return scored_blocks(
            ready.scorers, ready.estimator, rows, points, body.level, budget, ready.per_row
        )

    if batcher is not None and X.shape[0] == 1 and "interval" not in outputs:
        scores = batcher.score((model_id, tuple(sorted(outputs))), X, score)
    else:
        scores = scored_blocks(
            ready.scorers, ready.estimator, X, outputs, body.level, budget, ready.per_row
        )
    for spec in POINT_OUTPUTS:
        if spec.short in scores:
            out[spec.key] = (_labels if spec.labels else _floats)(scores[spec.short])
    if "interval" in scores:
        lower, upper = scores["interval"]
        out["intervals"] = {"level": body.level, "lower": _floats(lower), "upper": _floats(upper)}
        if is_pairwise(record):
            out["intervals"]["problems"] = [list(pair) for pair in problem_classes(record)]
    give_back_memory(X.nbytes)
    return out
