"""Numbers the plot routes need from the training data, computed once in the worker.

The server keeps no training data, so everything a plot needs beyond the fitted model is computed
at training time and stored in the record (``plot_data``):

* ``feature_stats``: per-feature mean, min and max of the training rows (decision-region plots
  hold the other features at their means and span min..max);
* ``path`` (the types with ``nu_path``: EM and ECME): the posterior mode over ``PATH_POINTS``
  values of ν spanning ±3 decades around the fitted ν, by EM warm-started from one ν to the next
  (``warm_start=True``); ECME's path is EM's at fixed ν around the learned ν (one ν per class:
  their geometric mean);
* ``compare`` (every Bayesian type): a ``LinearSVM`` on the same standardised data at C = ν²
  (per one-vs-rest problem, with that problem's ν), the C at which α = 2 has the same mode
  (bayes-svm.md §1.2). For α ≠ 2 the same C = ν² is used: the plot then shows what the prior's
  exponent changes relative to the ridge/SVM solution.

A type with a ν path computes both after its model is stored (``later_plot_data``, in a process
of its own), so a training's answer waits for neither (``path_pending`` until then): on breast
cancer the comparison's fit alone took 10 ms, a third of EM's own fit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import clone

from bsvm_core import LinearSVM
from bsvm_core.multiclass import problem_targets
from service.model_types import ModelSpec

logger = logging.getLogger("service.plots.data")
PATH_POINTS = 30
PATH_DECADES = 3.0
PATH_MAX_ITER = 1000
"""EM iterations of each warm-started path fit but the fitted ν's own (which repeats the model's
fit exactly). Warm-started neighbours converge in tens to hundreds; where the prior has stopped
mattering (ν far past the data's scale, β unbounded on separable data) EM never converges, and
10,000 iterations a point made the path of one such ECME model take 75-100 s."""


def feature_stats(X: np.ndarray) -> dict[str, list[float]]:
    """Column means, minima and maxima of the training rows."""
    return {"mean": X.mean(axis=0).tolist(), "min": X.min(axis=0).tolist(),
            "max": X.max(axis=0).tolist()}  # fmt: skip


def _centre_nu(estimator: Any) -> float:
    """The fitted ν (geometric mean over one-vs-rest problems when there are several)."""
    return float(np.exp(np.mean(np.log(np.atleast_1d(estimator.nu_)))))


def nu_grid(centre: float, points: int = PATH_POINTS, decades: float = PATH_DECADES) -> np.ndarray:
    """``points`` values of ν, log-spaced over ``centre`` × 10^[−decades, decades], ``centre`` included."""
    half = points // 2
    low = np.logspace(-decades, 0.0, half + 1)[:-1]
    high = np.logspace(0.0, decades, points - half)
    return centre * np.concatenate([low, high])


def regularisation_path(estimator: Any, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Coefficients (original and standardised scale) and ‖β‖ over the ν grid, warm-started EM.

    The grid is walked outwards from the fitted ν in both directions, so each fit starts from its
    neighbour's mode.
    """
    grid = nu_grid(_centre_nu(estimator))
    centre = int(np.argmin(np.abs(np.log(grid / _centre_nu(estimator)))))
    base = clone(estimator).set_params(method="em", warm_start=True, n_jobs=1)
    coef = np.empty((grid.size, *estimator.coef_.shape))
    coef_std = np.empty_like(coef)
    intercept = np.empty((grid.size, *np.shape(estimator.intercept_)))
    model = clone(base)
    start: np.ndarray | None = None
    for i in [*range(centre, grid.size), *range(centre - 1, -1, -1)]:
        if i == centre - 1 and start is not None:  # the downward walk starts from the centre
            model.beta_std_ = start
        if i != centre:
            model.set_params(max_iter=min(int(estimator.max_iter), PATH_MAX_ITER))
        model.set_params(nu=float(grid[i])).fit(X, y)
        coef[i], coef_std[i], intercept[i] = model.coef_, model.coef_std_, model.intercept_
        if i == centre:
            start = model.beta_std_.copy()
    return {
        "nu": grid.tolist(),
        "log10_nu": np.log10(grid).tolist(),
        "fitted_index": centre,
        "alpha": float(estimator.alpha),
        "coef": coef.tolist(),
        "coef_std": coef_std.tolist(),
        "intercept": intercept.tolist(),
        "norm": np.sqrt((coef_std**2).sum(axis=(1, 2))).tolist(),
    }


def path_pending(now: float | None = None) -> dict[str, Any]:
    """The record's path while it is being computed: ``{"pending": true, "since": epoch s}``."""
    return {"pending": True, "since": time.time() if now is None else now}


def linear_comparison(estimator: Any, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """``LinearSVM`` coefficients at C = ν² on the Bayesian model's standardised data, one per
    binary problem of the model on that problem's rows (one-vs-one: the pair's)."""
    Z = (X - estimator.mean_) / estimator.scale_
    problems = estimator.binary_problems_
    y_idx = np.searchsorted(estimator.classes_, y)  # classes_ are sorted
    nus = np.broadcast_to(np.atleast_1d(estimator.nu_), (len(problems),))
    coef_std, intercept_std, costs = [], [], []
    for problem, nu in zip(problems, nus, strict=True):
        C = float(nu) ** 2
        svm = LinearSVM(C=C, fit_intercept=bool(estimator.fit_intercept), tol=1e-8)
        rows, targets = problem_targets(y_idx, problem)
        svm.fit(Z if rows.all() else Z[rows], (targets > 0).astype(int))
        coef_std.append(svm.coef_.ravel())
        intercept_std.append(float(np.ravel(svm.intercept_)[0]))
        costs.append(C)
    coef_std_arr = np.asarray(coef_std)
    coef = coef_std_arr / estimator.scale_
    return {
        "C": costs,
        "coef_std": coef_std_arr.tolist(),
        "coef": coef.tolist(),
        "intercept_std": intercept_std,
        "intercept": (np.asarray(intercept_std) - coef @ estimator.mean_).tolist(),
    }


def _wanted(spec: ModelSpec, estimator: Any) -> dict[str, Callable[..., dict[str, Any]]]:
    """The plot data of the module notes beyond ``feature_stats`` that a ``spec`` model has."""
    wanted: dict[str, Callable[..., dict[str, Any]]] = {}
    if spec.nu_path:
        wanted["path"] = regularisation_path
    if hasattr(estimator, "posterior_summary") and hasattr(estimator, "nu_"):
        wanted["compare"] = linear_comparison
    return wanted


def _computed(
    spec: ModelSpec,
    estimator: Any,
    X: np.ndarray,
    y: np.ndarray,
    wanted: dict[str, Callable[..., dict[str, Any]]],
) -> dict[str, Any]:
    """Each of ``wanted`` computed, or ``{"error": ...}`` when its maths fails (the model stands)."""
    out: dict[str, Any] = {}
    for key, compute in wanted.items():
        try:
            out[key] = compute(estimator, X, y)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:  # the model stands
            logger.warning("no %s data for a %s model: %s", key, spec.model_type, exc)
            out[key] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return out


NO_PATH_BY_REFERENCE = (
    "no nu path for a model trained on data by reference (its rows are not held in memory)"
)
NOT_BY_REFERENCE = (
    "not computed for a model trained on data by reference (its rows are not held in memory)"
)


def by_reference_plot_data(
    spec: ModelSpec, estimator: Any, stats: dict[str, Any]
) -> dict[str, Any]:
    """The plot data of a model trained by reference: its ``feature_stats`` and, in the record
    from the start, an error entry for each plot that would refit on its rows (the ν path, the
    comparison), so their routes answer at once why there is none."""
    errors = {
        key: {"error": NO_PATH_BY_REFERENCE if key == "path" else NOT_BY_REFERENCE}
        for key in _wanted(spec, estimator)
    }
    return {"feature_stats": stats, **errors}


def later_keys(spec: ModelSpec, estimator: Any) -> list[str]:
    """The plot data ``plot_data(path=False)`` leaves pending for ``later_plot_data``: a type
    with a ν path's path and comparison; none for the others."""
    return list(_wanted(spec, estimator)) if spec.nu_path else []


def plot_data(
    spec: ModelSpec, estimator: Any, X: np.ndarray, y: np.ndarray, *, path: bool = True
) -> dict[str, Any]:
    """Everything of the module notes that applies to a fitted model of type ``spec``; without
    ``path``, what ``later_keys`` names is marked pending (``path_pending``: computed after the
    model is stored, by ``later_plot_data``)."""
    out: dict[str, Any] = {"feature_stats": feature_stats(X)}
    wanted = _wanted(spec, estimator)
    if not path:
        for key in later_keys(spec, estimator):
            out[key] = path_pending()
            del wanted[key]
    out.update(_computed(spec, estimator, X, y, wanted))
    return out


def later_plot_data(
    spec: ModelSpec, estimator: Any, X: np.ndarray, y: np.ndarray
) -> dict[str, Any]:
    """What ``plot_data(path=False)`` left pending, computed (``later_keys``: the ν path and the
    comparison of a type with a ν path)."""
    keys = later_keys(spec, estimator)
    return _computed(
        spec, estimator, X, y, {k: v for k, v in _wanted(spec, estimator).items() if k in keys}
    )
