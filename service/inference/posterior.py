"""A Bayesian model's posterior as the API shows it: coefficient summaries and one coefficient's draws."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from bsvm_core.bayesian_summary import draw_summary
from service.errors import Conflict, InvalidInput, detail
from service.model_types import model_types_with
from service.plots.problems import is_pairwise, problem_classes
from service.plots.trace import CoefficientTrace
from service.repository.store import ModelStore

DRAWS = model_types_with("draws")
BAYESIAN = model_types_with("mode", "draws")
MODE_ONLY = frozenset(model_types_with("mode").split(", "))


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


def coefficient_summaries(
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


def _problem_index(class_label: str | None, versus: str | None, record: dict[str, Any]) -> int:
    """Row of the problem ``class_label`` (and, one-vs-one, ``versus``) names (0 for two
    classes); 422 when unusable."""
    if is_pairwise(record):
        return _pair_index(class_label, versus, record)
    if versus is not None:
        raise InvalidInput(
            "versus does not apply",
            [
                detail(
                    "versus",
                    "only one-vs-one models with more than two classes have pairs; omit versus",
                )
            ],
        )
    labels = [str(c) for c in record["classes"]]
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


def _pair_index(class_label: str | None, versus: str | None, record: dict[str, Any]) -> int:
    """Row of the one-vs-one problem of the pair (``class_label``, ``versus``), either order."""
    pairs = [(str(a), str(b)) for a, b in problem_classes(record)]
    for p, pair in enumerate(pairs):
        if (class_label, versus) in (pair, pair[::-1]):
            return p
    listed = _listing([f"{a} vs {b}" for a, b in pairs])
    field = "class" if class_label is None or versus is not None else "versus"
    problem = (
        "class and versus are required for a one-vs-one model with more than two classes"
        if class_label is None or versus is None
        else "not a pair of classes of this model"
    )
    raise InvalidInput(
        "choose the pair of classes (one-vs-one) to plot",
        [detail(field, f"{problem}; one of: {listed}")],
    )


def coefficient_trace(
    store: ModelStore,
    model_id: str,
    coef: str,
    level: float,
    scale: str = "original",
    class_label: str | None = None,
    versus: str | None = None,
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
    problem = _problem_index(class_label, versus, {**record, "classes": classes})
    j = 0 if column is None else column + 1  # the core puts the intercept first
    draws = estimator.coefficient_draws(scale)[problem, :, :, j]
    mean = float(estimator.coefficient_means(scale)[problem, j])
    stats = draw_summary(draws, level)
    notes = [f"{scale} scale", f"{draws.shape[0]} chains x {draws.shape[1]} draws"]
    if len(classes) > 2:
        label, other = problem_classes({**record, "classes": classes})[problem]
        notes.insert(0, f"class {label} vs {'rest' if other is None else other}")
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
