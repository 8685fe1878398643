"""Scoring rows with a stored model, and reading a Bayesian model's posterior summary and draws."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bsvm_core.bayesian_summary import draw_summary
from service.data_checks import as_matrix, check_feature_names, check_n_features
from service.errors import Conflict, InvalidInput, detail
from service.inference.batching import MicroBatcher
from service.inference.limits import PredictGate, give_back_memory, row_bytes, score_in_blocks
from service.inference.query import PredictQuery
from service.inference.scoring import Scorer, scorer
from service.inference.servable import servable
from service.inference.signature import outputs_of
from service.model_types import model_types_with
from service.plots.trace import CoefficientTrace
from service.repository.store import ModelStore
from service.schemas.outputs import POINT_OUTPUTS, SHORT_NAMES
from service.settings import Settings

FLOAT_MAX = float(np.finfo(np.float64).max)
DRAWS = model_types_with("draws")
BAYESIAN = model_types_with("mode", "draws")
MODE_ONLY = frozenset(model_types_with("mode").split(", "))


def _floats(values: Any) -> list[Any]:
    """An array as nested lists of finite floats (±inf clipped to the largest double)."""
    arr = np.nan_to_num(
        np.asarray(values, dtype=np.float64), nan=0.0, posinf=FLOAT_MAX, neginf=-FLOAT_MAX
    )
    return arr.tolist()


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
) -> dict[str, Any]:
    """Our outputs for ``query``, whatever wire format it was decoded from: the one scoring call.

    The model reference's 404 names ``query.model_field``; no ``outputs`` asks for every point
    output the model has; 422 details name the fields as the sender wrote them. Holds a slot of
    the ``gate`` (503 when every slot is taken).
    """
    try:
        if query.outputs is None or query.model_field != "model":
            model_id = store.resolve(query.model, query.model_field)
            outputs = query.outputs
            query = query.with_model(
                model_id, outputs_of(store.load(model_id)) if outputs is None else outputs
            )
        with gate.slot():
            return predict(store, settings, query, batcher)
    except InvalidInput as exc:
        exc.details = query.sender_details(exc.details)
        raise


def predict(
    store: ModelStore, settings: Settings, body: PredictQuery, batcher: MicroBatcher | None = None
) -> dict[str, Any]:
    """The outputs ``body.outputs`` of the model ``body.model`` on ``body.X``.

    With a ``batcher``, a one-row predict is scored together with concurrent ones of the model.
    """
    model_id = store.resolve(body.model)
    record = store.model_record(model_id)
    X = as_matrix(body.X, settings)
    X, dropped = select_columns(
        X, body.feature_names, record.get("feature_names"), record.get("target")
    )
    check_n_features(X, int(record["n_features"]))
    ready = servable(store, model_id)
    outputs = {SHORT_NAMES.get(name, name) for name in body.outputs}
    if not outputs <= ready.gives:
        check_outputs(ready.estimator, record, model_id, outputs)
    out: dict[str, Any] = {**ready.head, "dropped_columns": dropped}
    budget = settings.predict_memory_mb * 2**20
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
    give_back_memory(X.nbytes)
    return out


def _clean(entry: dict[str, Any]) -> dict[str, Any]:
    """One coefficient's summary with numpy scalars unwrapped and NaN/inf as null."""
    out = {}
    for key, value in entry.items():
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        out[str(key)] = value
    return out


def _display_name(name: str, feature_names: Sequence[str] | None) -> str:
    """The core's coefficient name ``x<j>`` as the model's j-th feature name when it has one."""
    if feature_names and name[:1] == "x" and name[1:].isdigit():
        j = int(name[1:])
        if j < len(feature_names):
            return str(feature_names[j])
    return name


def posterior(
    store: ModelStore, model_id: str, level: float, scale: str = "original"
) -> dict[str, Any]:
    """``posterior_summary(level)`` of a Bayesian model; 409 for a model without a posterior.

    Coefficients the core names ``x0, x1, ...`` get the model's feature names when it has them.
    """
    record = store.get_record(model_id)
    estimator = store.load(model_id)
    if not hasattr(estimator, "posterior_summary"):
        raise Conflict(
            f"model {model_id} is a {record['model_type']}, which has no posterior; coefficient "
            f"summaries exist only for Bayesian models ({BAYESIAN})",
            [detail("model_id", "not a Bayesian model")],
        )
    coefficients = [_clean(entry) for entry in estimator.posterior_summary(level, scale=scale)]
    mode_only = record["model_type"] in MODE_ONLY
    for entry in coefficients:
        if mode_only:  # EM/ECME: the summary's "mean" is the posterior mode; say so
            entry["mode"] = entry.pop("mean", None)
            for key in ("sd", "lower", "upper", "ess", "rhat"):
                entry.pop(key, None)
        entry["name"] = _display_name(str(entry.get("name", "")), record.get("feature_names"))
    return {"model_id": model_id, "level": level, "scale": scale, "coefficients": coefficients}


MAX_LISTED = 20
"""Valid coefficient names listed in a 422 before the list is cut."""


def _coefficient_names(estimator: Any, record: dict[str, Any]) -> list[str]:
    """Feature coefficients' names as ``GET /models/{id}/posterior`` shows them (no intercept)."""
    core = getattr(estimator, "feature_names_in_", None)
    if core is None:
        core = [f"x{j}" for j in range(int(record["n_features"]))]
    return [_display_name(str(name), record.get("feature_names")) for name in core]


def _listing(names: Sequence[str]) -> str:
    """``names`` joined by commas, cut after ``MAX_LISTED`` with a count of the rest."""
    shown = ", ".join(names[:MAX_LISTED])
    rest = len(names) - MAX_LISTED
    return f"{shown}, ... ({rest} more)" if rest > 0 else shown


def _coefficient_column(coef: str, names: Sequence[str]) -> int | None:
    """``None`` for the intercept, else the feature index that ``coef`` names; 422 when unknown."""
    if coef == "intercept":
        return None
    if coef in names:
        return list(names).index(coef)
    if coef.isascii() and coef.isdigit() and int(coef) < len(names):
        return int(coef)
    valid = f"intercept, a feature index 0..{len(names) - 1}, or one of: {_listing(names)}"
    raise InvalidInput(
        "unknown coefficient", [detail("coef", f"not a coefficient of this model; use {valid}")]
    )


def _problem_index(class_label: str | None, classes: list[Any]) -> int:
    """Row of the one-vs-rest problem of ``class_label`` (0 for two classes); 422 when unusable."""
    labels = [str(c) for c in classes]
    if len(labels) == 2:
        if class_label is None or class_label == labels[1]:
            return 0
        problem = f"a two-class model has one set of coefficients, for {labels[1]} against "
        raise InvalidInput(
            "class does not apply", [detail("class", problem + f"{labels[0]}; omit class")]
        )
    if class_label in labels:
        return labels.index(class_label)
    problem = "not a class of this model"
    if class_label is None:
        problem = "required for a model with more than two classes"
    raise InvalidInput(
        "choose the class (one-vs-rest) to plot",
        [detail("class", f"{problem}; one of: {_listing(labels)}")],
    )


def coefficient_trace(
    store: ModelStore,
    model_id: str,
    coef: str,
    level: float,
    scale: str = "original",
    class_label: str | None = None,
) -> CoefficientTrace:
    """Draws and summary of one coefficient of an MCMC model; 409 for a model without draws."""
    record = store.get_record(model_id)
    estimator = store.load(model_id)
    model_type = record["model_type"]
    if not hasattr(estimator, "posterior_summary"):
        raise Conflict(
            f"model {model_id} ({model_type}) is not Bayesian and has no posterior; trace "
            f"plots exist only for Bayesian models fitted by sampling ({DRAWS})",
            [detail("model_id", "not a Bayesian model")],
        )
    if not hasattr(estimator, "beta_draws_std_"):
        raise Conflict(
            f"model {model_id} ({model_type}) has a posterior mode but no posterior draws "
            f"to plot; trace plots need a model fitted by sampling ({DRAWS})",
            [detail("model_id", "no posterior draws (EM/ECME give the mode only)")],
        )
    names = _coefficient_names(estimator, record)
    column = _coefficient_column(coef, names)
    classes = record.get("classes") or estimator.classes_.tolist()
    problem = _problem_index(class_label, classes)
    j = 0 if column is None else column + 1  # the core puts the intercept first
    draws = estimator.coefficient_draws(scale)[problem, :, :, j]
    mean = float(estimator.coefficient_means(scale)[problem, j])
    stats = draw_summary(draws, level)
    notes = [f"{scale} scale", f"{draws.shape[0]} chains x {draws.shape[1]} draws"]
    if len(classes) > 2:
        notes.insert(0, f"class {classes[problem]} vs rest")
    inclusion = getattr(estimator, "inclusion_prob_", None)
    if inclusion is not None and column is not None:
        notes.append(f"P(included) {float(inclusion[problem, column]):.3f}")
    return CoefficientTrace(
        draws=np.asarray(draws, dtype=np.float64),
        name="intercept" if column is None else names[column],
        mean=mean,
        lower=stats["lower"],
        upper=stats["upper"],
        level=level,
        rhat=stats["rhat"],
        ess=stats["ess"],
        subtitle=", ".join(notes),
    )
