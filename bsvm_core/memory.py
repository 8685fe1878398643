"""Memory a fit will need, estimated before fitting from the shape of the data alone.

``estimate_artifact_bytes`` bounds from above the size of the fitted model (its pickle or joblib
dump): the float64 arrays it keeps, counted from the attributes each estimator stores, plus a
fixed allowance for the Python objects around them. ``estimate_fit_bytes`` adds the working
memory of the fit itself (copies of X, the kernel-row cache, the MCMC chains before they are
stacked). Both are pure functions of the parameters and (n_samples, n_features, n_classes).
"""

from __future__ import annotations

from typing import Any

from .bayesian_svm import BayesianSVM
from .exceptions import BsvmValueError
from .kernel_dual import (
    ACTIVE_SET_MAX_ROWS,
    BATCHED_MIN_ROWS,
    DENSE_MAX_ROWS,
    DOUBLED_PROBE_MAX_ROWS,
)
from .kernel_lockstep import lockstep_applies
from .kernel_svm import KernelSVM
from .lda import LDA
from .linear_svm import LinearSVM
from .multiclass import binary_problems
from .qda import QDA
from .solvers.face_newton import MAX_CONTINUED_COLUMNS
from .solvers.smo import NEWTON_MAX_FREE

FLOAT = 8
"""Bytes of a float64 (and of an int64 index)."""

OVERHEAD_BYTES = 8192
"""Allowance for the pickled object itself: class, parameters, small scalars, array headers."""

PER_CLASS_BYTES = 256
"""Allowance per class for ``classes_`` labels (strings, Python ints) and per-class scalars."""

PER_PROBLEM_BYTES = 512
"""Allowance per binary problem for its small Python objects (dataclasses, Platt pairs)."""


def _problems(estimator: Any, n_classes: int) -> list[tuple[int, int]]:
    scheme = getattr(estimator, "multiclass", "ovr")
    return binary_problems(n_classes, scheme if scheme in ("ovo", "ovr") else "ovr")


def _problem_rows(problem: tuple[int, int], n_samples: int, n_classes: int) -> int:
    """Rows of one binary problem, at most: all of them (one-vs-rest, two classes) or a pair's."""
    if n_classes == 2 or problem[1] < 0:
        return n_samples
    return min(n_samples, n_samples - (n_classes - 2))  # both classes hold all but K − 2 rows


def _array_bytes(estimator: Any, n: int, d: int, K: int) -> int:
    """float64/int64 entries the fitted estimator keeps, times 8."""
    problems = _problems(estimator, K)
    P = len(problems)
    if isinstance(estimator, LinearSVM):
        return FLOAT * (2 * P * d + 6 * P)  # coef_ + each problem's w; intercepts, iterations
    if isinstance(estimator, KernelSVM):
        # every row may be a support vector: support_, support_vectors_, dual_coef_, and each
        # binary model's own indices, support vectors and coefficients
        per_problem = sum(_problem_rows(p, n, K) for p in problems) * (d + 2)
        # rbf: the scoring factor (d + 2) × n, its centre and the error bound per problem
        rbf = n * (d + 2) + d + P if estimator.kernel == "rbf" else 0
        return FLOAT * (n * (d + 1) + P * n + per_problem + 4 * P + K + rbf)
    if isinstance(estimator, LDA):
        return FLOAT * (d * d + 3 * K * d + 3 * K)
    if isinstance(estimator, QDA):
        return FLOAT * (2 * K * d * d + 2 * K * d + 3 * K)
    if isinstance(estimator, BayesianSVM):  # P: one per class (ovr) or per pair (ovo)
        k = d + 1  # coefficients with the intercept (one fewer without it)
        point = FLOAT * (P * (3 * k + 6) + 2 * d)  # beta_std_, coef_, rhat_, ess_, mean_, scale_
        if estimator.method not in ("mcmc", "spike_slab"):
            return point
        draws = int(estimator.n_chains) * int(estimator.n_draws)
        # beta_draws_std_ (k per draw) + coef_draws_ (d) + intercept_draws_ (1), per problem
        stored = FLOAT * draws * P * (k + d + 1)
        inclusion = FLOAT * P * k if estimator.method == "spike_slab" else 0
        return point + stored + inclusion
    raise BsvmValueError(f"no memory model for {type(estimator).__name__}.")


def _check_shape(n_samples: int, n_features: int, n_classes: int) -> None:
    for name, value, low in (("n_samples", n_samples, 1), ("n_features", n_features, 1),
                             ("n_classes", n_classes, 2)):  # fmt: skip
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise BsvmValueError(f"{name} must be an integer >= {low}, got {value!r}.")


def estimate_artifact_bytes(estimator: Any, n_samples: int, n_features: int, n_classes: int) -> int:
    """Upper bound on the bytes of ``joblib.dump(estimator.fit(X, y))`` for X (n, d), K classes.

    MCMC and spike-and-slab: chains × draws × problems × (2d + 2) float64 (the draws on both
    scales); KernelSVM: every training row a support vector; the rest is a few (d × d) or
    (problems × d) arrays. ``OVERHEAD_BYTES`` + ``PER_CLASS_BYTES`` per class + ``PER_PROBLEM_BYTES``
    per binary problem cover the Python objects and labels.
    """
    _check_shape(n_samples, n_features, n_classes)
    arrays = _array_bytes(estimator, n_samples, n_features, n_classes)
    P = len(_problems(estimator, n_classes))
    return int(arrays + OVERHEAD_BYTES + PER_CLASS_BYTES * n_classes + PER_PROBLEM_BYTES * P)


def estimate_fit_bytes(estimator: Any, n_samples: int, n_features: int, n_classes: int) -> int:
    """Rough peak memory of ``fit`` beyond the caller's X: the artifact plus working arrays.

    Counts validated and standardised copies of X (3 n d float64), KernelSVM's kernel rows
    (within ``cache_mb``, one binary problem at a time: up to ``DENSE_MAX_ROWS`` rows a float64
    matrix, then float64 cached rows, from ``BATCHED_MIN_ROWS`` float32 rows; each of n entries, with the active sets' kept rows and a
    round's columns of them below ``ACTIVE_SET_MAX_ROWS``: up to 24 n² bytes, 40 n² up to
    ``kernel_dual.DOUBLED_PROBE_MAX_ROWS`` (the probe's [D | D] and the rows of D^(−1/2) of an SMO
    resumed after the active sets); one-vs-one fits that
    ``kernel_lockstep.lockstep_applies`` takes: a float32 matrix and the problems' float32 blocks
    (``solvers.lockstep_blocks``), (12 − 8/K) n² on K balanced classes, more on skewed ones
    but then as many blocks at a time as ``cache_mb`` holds: 12 n² within ``cache_mb``), beside
    them a face-Newton step's arrays (k = min(n, ``smo.NEWTON_MAX_FREE``) free points: k rows of
    a whole matrix, K_FF and its factor, the continuation's columns: 8 k (n + 2k + 100) bytes;
    without the n from cached rows), from ``BATCHED_MIN_ROWS`` rows the float64 kernel block of
    the end point's check and the refreshes of F (its (d + 2) × n columns, a gathered copy and
    8 rows of n as scratch; the check and the polish reuse the rows' bytes) and
    BayesianSVM's per-problem design matrices and per-chain draws before they are stacked.
    """
    _check_shape(n_samples, n_features, n_classes)
    n, d, K = n_samples, n_features, n_classes
    artifact = estimate_artifact_bytes(estimator, n, d, K)
    working = 3 * FLOAT * n * d
    if isinstance(estimator, KernelSVM):
        # dense matrix (8 n²) and, below ACTIVE_SET_MAX_ROWS, kept rows and a round's columns
        # float64 rows up to BATCHED_MIN_ROWS (a whole matrix, then kernel_cache), float32 after
        rows = (24 if n < ACTIVE_SET_MAX_ROWS else 8 if n < BATCHED_MIN_ROWS else 4) * n * n
        if n <= DOUBLED_PROBE_MAX_ROWS:  # [D | D], kept rows, their columns, rows of D^(−1/2)
            rows = 40 * n * n
        cache_mb = float(estimator.cache_mb)
        P = len(_problems(estimator, K)) if estimator.multiclass == "ovo" else 0
        if lockstep_applies(n, P, estimator.kernel, float(estimator.C), cache_mb):
            rows = max(rows, 12 * n * n)  # its float32 matrix and the problems' blocks
        working += min(int(cache_mb * 2**20), rows) + 4 * FLOAT * n
        # a face-Newton step on k free points: their rows of a whole matrix, K_FF and its factor,
        # and the continuation's held columns (2k each, up to MAX_CONTINUED_COLUMNS) and vectors
        k = min(n, NEWTON_MAX_FREE)
        extra = 2 * k + 2 * MAX_CONTINUED_COLUMNS + 20
        working += FLOAT * k * ((n if n <= DENSE_MAX_ROWS else 0) + extra)
        if n >= BATCHED_MIN_ROWS:  # the end point's float64 check and polish (batched_smo)
            working += FLOAT * (2 * (d + 2) + 10) * n  # float64 block columns, copy, 8 rows
    if isinstance(estimator, BayesianSVM):  # tasks (a pair's rows in ovo), chain outputs
        rows = sum(_problem_rows(p, n, K) for p in _problems(estimator, K))
        working += FLOAT * rows * (d + 1) + artifact
    return int(artifact + working)
