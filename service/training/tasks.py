"""From a validated ``POST /train`` body to a ``TrainTask``, and from a finished fit to a record.

Everything that can be checked without fitting is checked here, in the request, so a bad request
gets its 422 at once (also with ``background``). The seed: when a type takes ``random_state`` and
none was given, the service draws one and records it, so every stored model can be refitted.
"""

from __future__ import annotations

import math
import platform
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import numpy as np

from bsvm_core.discriminant import resolve_priors
from bsvm_core.exceptions import BsvmValueError
from bsvm_core.memory import estimate_artifact_bytes
from service.data_checks import as_labels, as_matrix, check_feature_names
from service.errors import InvalidInput, detail
from service.model_types import ModelSpec, ModelTypes
from service.settings import Settings
from service.training.metrics import heldout_split
from service.training.search_request import selection_plan

if TYPE_CHECKING:
    from service.training.fitting import FitResult

LIBRARIES = ("bsvm", "numpy", "scipy", "scikit-learn", "joblib")
ITERATION_PARAMS = ("max_iter", "n_draws", "burn_in")


@dataclass
class TrainTask:
    """Everything a worker needs to fit and evaluate one model (picklable)."""

    spec: ModelSpec
    params: dict[str, Any]
    X: np.ndarray | None
    y: np.ndarray | None
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    memory_limit_mb: float | None = None
    """Address space the worker may add to what it starts with (RLIMIT_AS); None: no limit."""
    cv: dict[str, int] | None = None
    """``{k, random_state}``: cross-validate the final parameters (``metrics.cv``)."""
    search: dict[str, Any] | None = None
    """``{grid, scoring, k, random_state}``: pick the parameters by cross-validation first."""
    data: dict[str, Any] | None = None
    """The rows by reference in place of X and y (``training.reference_task``): the checked,
    normalised source, never its rows."""

    @property
    def model_type(self) -> str:
        """The registered model type this task fits."""
        return self.spec.model_type

    @property
    def n_features(self) -> int:
        """Features of the training rows (posted or by reference)."""
        if self.data is not None:
            return len(self.data["features"])
        assert self.X is not None
        return int(self.X.shape[1])


def jsonable(value: Any) -> Any:
    """Plain JSON values: numpy scalars and arrays unwrapped, non-finite floats as strings."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def _check_params(params: dict[str, Any], y: np.ndarray | None, settings: Settings) -> None:
    """Iteration caps of ``BSVM_MAX_ITER``, and priors by the core's own rule (one per class)."""
    for key in ITERATION_PARAMS:
        value = params.get(key)
        if value is not None and value > settings.max_iter:
            raise InvalidInput(
                "parameter out of bounds",
                [detail(f"params.{key}", f"must be at most {settings.max_iter} (BSVM_MAX_ITER)")],
            )
    if params.get("priors") is not None and y is not None:
        try:
            resolve_priors(params["priors"], np.unique(y, return_counts=True)[1])
        except ValueError as exc:
            raise InvalidInput("invalid priors", [detail("params.priors", str(exc))]) from None


def _preprocess(spec: ModelSpec, asked: str | None) -> str:
    """The preprocessing of this training: the request's, else the model type's default."""
    chosen = asked or spec.preprocess
    if chosen == "standard" and spec.standardises:
        raise InvalidInput(
            "preprocessing does not apply",
            [
                detail(
                    "preprocess",
                    f"{spec.model_type} standardises its features itself and reports "
                    "coefficients on both scales; use none",
                )
            ],
        )
    return chosen


def _check_memory(
    spec: ModelSpec, params: dict[str, Any], shape: tuple[int, int], n_classes: int, s: Settings
) -> None:
    """Refuse (422) before any work a kernel cache or a fitted model over the settings' bounds."""
    cache_mb = params.get("cache_mb")
    if cache_mb is not None and cache_mb > s.max_cache_mb:
        raise InvalidInput(
            "parameter out of bounds",
            [detail("params.cache_mb", f"must be at most {s.max_cache_mb:g} (BSVM_MAX_CACHE_MB)")],
        )
    try:
        size = estimate_artifact_bytes(spec.make_estimator(params), *shape, n_classes)
    except BsvmValueError:  # a model type the estimates do not know: nothing to check
        return
    if size > s.max_artifact_mb * 2**20:
        field = spec.size_field
        hint = (
            "lower n_draws or n_chains, or thin the chains"
            if field != "X"
            else "send fewer rows or features"
        )
        raise InvalidInput(
            "the fitted model would be too large",
            [
                detail(
                    field,
                    f"the model would take about {size / 2**20:.0f} MiB; the limit is "
                    f"{s.max_artifact_mb:g} MiB (BSVM_MAX_ARTIFACT_MB): {hint}",
                )
            ],
        )


def prepare_task(request: Any, settings: Settings, types: ModelTypes) -> TrainTask:
    """Check a train request against the limits and build the worker's task (422 on problems)."""
    if request.data is not None:
        from service.training.reference_task import prepare_reference_task

        return prepare_reference_task(request, settings, types)
    for name in ("X", "y"):
        if getattr(request, name) is None:
            raise InvalidInput(
                "no training rows", [detail(name, "required (or send data by reference)")]
            )
    spec = types[request.model_type]  # the body's union admits registered types only
    X = as_matrix(request.X, settings)
    y = as_labels(request.y, X.shape[0], settings)
    feature_names = check_feature_names(request.feature_names, X.shape[1])
    params = request.params.model_dump()
    _check_params(params, y, settings)
    _check_memory(spec, params, X.shape, int(np.unique(y).size), settings)
    preprocess = _preprocess(spec, getattr(request, "preprocess", None))
    seed = params.get("random_state")
    if "random_state" in params and seed is None:
        seed = params["random_state"] = secrets.randbelow(2**31)
    task = TrainTask(spec=spec, params=params, X=X, y=y, memory_limit_mb=settings.worker_memory_mb)
    evaluation = None
    if request.evaluation is not None:
        split_seed = request.evaluation.random_state
        if split_seed is None:
            split_seed = seed if seed is not None else secrets.randbelow(2**31)
        fraction = request.evaluation.test_fraction
        if fraction is None and request.evaluation.cv is None:
            fraction = 0.25
        try:
            if fraction is not None:
                task.X, task.X_test, task.y, task.y_test = heldout_split(X, y, fraction, split_seed)
        except ValueError:
            raise InvalidInput(
                "cannot hold out a stratified split",
                [
                    detail(
                        "evaluation.test_fraction",
                        "every class needs rows on both sides of the split; send more rows or "
                        "change test_fraction",
                    )
                ],
            ) from None
        evaluation = {"test_fraction": fraction, "random_state": split_seed}
    if request.evaluation is not None or request.search is not None:
        select_seed = evaluation["random_state"] if evaluation else seed
        if select_seed is None:
            select_seed = secrets.randbelow(2**31)
        task.cv, task.search = selection_plan(request, spec, params, task.y, select_seed)
        for candidate in task.search["candidates"] if task.search else ():
            _check_params({**params, **candidate}, task.y, settings)
            _check_memory(spec, {**params, **candidate}, X.shape, int(np.unique(y).size), settings)
    task.meta = {
        "name": request.name or request.model_type,
        "feature_names": feature_names,
        "target": getattr(request, "target", None),
        "random_state": seed,
        "evaluation": evaluation,
        "tags": dict(request.tags or {}),
        "description": request.description,
        "replace_schema": bool(request.replace_schema),
        "preprocess": preprocess,
    }
    return task


def library_version(name: str) -> str | None:
    """Installed version of distribution ``name``, or ``None``."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


@cache
def library_versions() -> dict[str, str | None]:
    """Python and the libraries a stored model depends on (as loaded: read once per process,
    since reading the installed distributions' metadata takes milliseconds)."""
    return {
        "python": platform.python_version(),
        **{name: library_version(name) for name in LIBRARIES},
    }


def signature(task: TrainTask, estimator: Any) -> dict[str, Any]:
    """The model's input and output schema, as MLflow's signatures give it."""
    names = task.meta.get("feature_names") or [f"x{j}" for j in range(task.n_features)]
    classes = estimator.classes_.tolist()
    return {
        "inputs": [{"name": str(n), "type": "double"} for n in names],
        "outputs": {
            "classes": classes,
            "label_type": "string" if classes and isinstance(classes[0], str) else "long",
        },
        "target": task.meta.get("target"),
    }


def build_record(task: TrainTask, result: FitResult) -> dict[str, Any]:
    """The model record (without id, version and digest, which the store adds)."""
    estimator = result.estimator
    metrics = dict(result.metrics)
    if metrics.get("heldout") is not None:
        metrics["heldout"] = {**metrics["heldout"], **task.meta["evaluation"]}
    extras = dict(result.extras)
    plots = dict(extras.pop("plot_data", {}))
    if metrics.get("cv") is not None:
        metrics["cv"] = dict(metrics["cv"])
        plots["roc"] = metrics["cv"].pop("roc")
    stats = plots.get("feature_stats", {})
    return jsonable(
        {
            "name": task.meta["name"],
            "model_type": task.model_type,
            "params": result.params,
            "classes": estimator.classes_.tolist(),
            "n_features": int(estimator.n_features_in_),
            "feature_names": task.meta["feature_names"],
            "tags": task.meta.get("tags") or {},
            "preprocess": task.meta.get("preprocess", "none"),
            "description": task.meta.get("description"),
            "signature": signature(task, estimator),
            "target": task.meta.get("target"),
            "training": result.training,
            "metrics": metrics,
            "created_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "random_state": task.meta["random_state"],
            "has_probabilities": hasattr(estimator, "predict_proba"),
            "has_posterior": hasattr(estimator, "posterior_summary"),
            "library_versions": dict(library_versions()),
            "feature_means": stats.get("mean"),
            "feature_min": stats.get("min"),
            "feature_max": stats.get("max"),
            "data": task.meta.get("data"),
            **extras,
            "plot_data": plots,
        }
    )
