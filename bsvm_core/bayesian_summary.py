"""Posterior summaries of a fitted BayesianSVM: per-coefficient tables and decision-value intervals."""

from __future__ import annotations

from typing import Any

import numpy as np

from .draw_quantiles import DEFAULT_MAX_BYTES, stacked_projection_quantiles
from .exceptions import BsvmValueError
from .multiclass import problem_classes as labels_of


def _check_level(level: float) -> tuple[float, float]:
    if not (isinstance(level, int | float) and 0.0 < level < 1.0):
        raise BsvmValueError(f"level must be a number in (0, 1), got {level!r}.")
    return (1.0 - level) / 2.0, (1.0 + level) / 2.0


def decision_draws(
    X: np.ndarray,
    coef_draws: np.ndarray,
    intercept_draws: np.ndarray,
    level: float,
    max_bytes: int | float = DEFAULT_MAX_BYTES,
    n_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed interval of f = x'β + b over all chains × draws; (n,) or (n, n_classes) each.

    The quantiles are numpy's linear rule over the draws of f (``draw_quantiles``), computed in
    blocks of rows that hold at most ``max_bytes``; the problems (one per class in one-vs-rest)
    share the threads.
    """
    lo_q, hi_q = _check_level(level)
    binary = coef_draws.ndim == 3
    coef = coef_draws.reshape(-1, 1 if binary else coef_draws.shape[2], coef_draws.shape[-1])
    b0 = intercept_draws.reshape(coef.shape[0], coef.shape[1])
    problems = range(coef.shape[1])
    bounds = stacked_projection_quantiles(
        X,
        [coef[:, p, :].T for p in problems],
        [b0[:, p] for p in problems],
        (lo_q, hi_q),
        max_bytes,
        n_threads,
    )
    lower, upper = bounds[:, 0].T, bounds[:, 1].T
    return (lower.ravel(), upper.ravel()) if binary else (lower, upper)


def feature_names(est: Any) -> list[str]:
    """Names of the fitted features: ``feature_names_in_`` or x0, x1, ..."""
    names = getattr(est, "feature_names_in_", None)
    if names is not None:
        return [str(n) for n in names]
    return [f"x{j}" for j in range(est.n_features_in_)]


def problem_classes(est: Any) -> list[tuple[Any, Any]]:
    """(class, versus) labels of each of ``est``'s binary problems (``multiclass``)."""
    return labels_of(est.classes_.tolist(), est.binary_problems_)


def problem_names(est: Any) -> list[str]:
    """A name for each binary problem in messages: ``class 'a'`` or ``'a' vs 'b'``."""
    return [
        f"class {pos!r}" if neg is None else f"{pos!r} vs {neg!r}"
        for pos, neg in problem_classes(est)
    ]


def _with_intercept(est: Any, beta: np.ndarray, scale: str) -> np.ndarray:
    """(..., k) standardised β → (..., 1 + d) with the intercept first, on the requested scale."""
    if scale == "original":
        coef, b0 = est._to_original(beta)
        return np.concatenate([b0[..., None], coef], axis=-1)
    if est.fit_intercept:
        return beta
    return np.concatenate([np.zeros((*beta.shape[:-1], 1)), beta], axis=-1)


def check_scale(scale: str) -> None:
    """Raise unless ``scale`` is one of the two scales coefficients are reported on."""
    if scale not in ("original", "standardised"):
        raise BsvmValueError(f"scale must be 'original' or 'standardised', got {scale!r}.")


def coefficient_means(est: Any, scale: str) -> np.ndarray:
    """(problems, 1 + d) point estimates, intercept first: the mode (EM/ECME) or posterior mean."""
    check_scale(scale)
    return _with_intercept(est, est.beta_std_, scale)


def coefficient_draws(est: Any, scale: str) -> np.ndarray:
    """(problems, chains, draws, 1 + d) posterior draws, intercept first, on ``scale``."""
    check_scale(scale)
    return _with_intercept(est, est.beta_draws_std_, scale)


def draw_summary(draws: np.ndarray, level: float) -> dict[str, float | None]:
    """sd, equal-tailed lower/upper, bulk ESS and split R-hat of one coefficient's (chains, draws).

    ESS and R-hat are None when they are undefined: constant draws or fewer than 8 per chain.
    """
    from .diagnostics import ess_bulk, rhat_rank
    from .mcmc_convergence import MIN_DRAWS

    lo_q, hi_q = _check_level(level)
    lower, upper = np.quantile(draws, [lo_q, hi_q])
    defined = draws.shape[-1] >= MIN_DRAWS and bool(np.ptp(draws) > 0)
    return {
        "sd": float(draws.std(ddof=1)) if draws.size > 1 else 0.0,
        "lower": float(lower),
        "upper": float(upper),
        "ess": float(ess_bulk(draws)) if defined else None,
        "rhat": float(rhat_rank(draws)) if defined else None,
    }


def summarise(est: Any, level: float, scale: str) -> list[dict[str, Any]]:
    """Rows {name, mean, sd, lower, upper, ess, rhat[, inclusion_prob][, class[, versus]]},
    intercept first: ``class`` is the problem's positive class with more than two classes,
    ``versus`` its negative class in one-vs-one."""
    _check_level(level)
    names = ["intercept", *feature_names(est)]
    means = coefficient_means(est, scale)
    draws = coefficient_draws(est, scale) if hasattr(est, "beta_draws_std_") else None
    incl = getattr(est, "inclusion_prob_", None)
    n_problems = means.shape[0]
    labels = problem_classes(est) if n_problems > 1 else []
    rows: list[dict[str, Any]] = []
    for p in range(n_problems):
        for j, name in enumerate(names):
            row: dict[str, Any] = {"name": name, "mean": float(means[p, j])}
            row.update(sd=None, lower=None, upper=None, ess=None, rhat=None)
            if draws is not None:
                row.update(draw_summary(draws[p, :, :, j], level))
            if incl is not None:
                row["inclusion_prob"] = 1.0 if j == 0 else float(incl[p, j - 1])
            if n_problems > 1:
                row["class"] = labels[p][0]
                if labels[p][1] is not None:
                    row["versus"] = labels[p][1]
            rows.append(row)
    return rows
