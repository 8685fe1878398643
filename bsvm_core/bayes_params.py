"""The parameters of a ``BayesianSVM``, checked before a fit (bayes-svm.md for their meaning)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .exceptions import BsvmValueError

METHODS = ("em", "ecme", "mcmc", "spike_slab")
PRIOR_RANGE = (1e-100, 1e100)
"""Allowed range of nu, a_nu and b_nu: their squares and reciprocals stay far from over/underflow."""


def is_number(value: Any) -> bool:
    """A real number (int, float or numpy number), not a bool."""
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    """An integer (int or numpy integer), not a bool."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def check_params(est: Any) -> None:
    """BsvmValueError naming the first parameter of ``est`` (a ``BayesianSVM``) out of range."""
    checks = [
        (est.method in METHODS, f"method must be one of {METHODS}, got {est.method!r}."),
        (is_number(est.alpha) and 0 < est.alpha <= 2, "alpha must be in (0, 2]."),
        (
            is_number(est.nu) and PRIOR_RANGE[0] <= est.nu <= PRIOR_RANGE[1],
            f"nu must be a number in [{PRIOR_RANGE[0]:g}, {PRIOR_RANGE[1]:g}], got {est.nu!r} "
            "(the prior precision nu^-2 and the slab variance nu^2 must stay inside float64).",
        ),
        (
            is_number(est.a_nu) and PRIOR_RANGE[0] <= est.a_nu <= PRIOR_RANGE[1],
            f"a_nu must be a number in [{PRIOR_RANGE[0]:g}, {PRIOR_RANGE[1]:g}].",
        ),
        (
            is_number(est.b_nu) and PRIOR_RANGE[0] <= est.b_nu <= PRIOR_RANGE[1],
            f"b_nu must be a number in [{PRIOR_RANGE[0]:g}, {PRIOR_RANGE[1]:g}].",
        ),
        (
            is_integer(est.n_draws) and est.n_draws >= 4,
            "n_draws must be an integer >= 4 (split R-hat needs 4 draws per chain).",
        ),
        (is_integer(est.burn_in) and est.burn_in >= 0, "burn_in must be an integer >= 0."),
        (is_integer(est.n_chains) and est.n_chains >= 1, "n_chains must be an integer >= 1."),
        (is_integer(est.thin) and est.thin >= 1, "thin must be an integer >= 1."),
        (
            is_number(est.prior_inclusion) and 0 < est.prior_inclusion <= 1,
            "prior_inclusion in (0,1]",
        ),
        (is_number(est.tol) and est.tol > 0, "tol must be > 0."),
        (is_integer(est.max_iter) and est.max_iter >= 1, "max_iter must be an integer >= 1."),
        (
            est.multiclass in ("ovr", "ovo"),
            f"multiclass must be 'ovr' or 'ovo', got {est.multiclass!r}.",
        ),
        (
            est.method != "spike_slab" or est.alpha in (1.0, 2.0),
            "spike_slab supports alpha 1 (Laplace slab) or 2 (Gaussian slab) only.",
        ),
        (
            est.method != "spike_slab" or not est.learn_nu,
            "spike_slab keeps nu fixed (bayes-svm.md §7); learn_nu must be False.",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise BsvmValueError(message)
