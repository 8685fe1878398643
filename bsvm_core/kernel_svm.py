"""KernelSVM: the C-SVC dual by active sets or SMO (``solvers.active_set``, ``.smo``, ``.batched_smo``)."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._blas import single_blas_thread
from ._svm_base import SVMClassifierBase
from ._validation import FLOAT_MAX, check_fitted, check_predict_data
from .exceptions import BsvmValueError, ConvergenceWarning, DataRangeError, NotSeparableError
from .kernels import (
    KERNELS,
    float32_exponent_error,
    kernel_block_function,
    kernel_diagonal,
    kernel_matrix,
    kernel_row_function,
    resolve_gamma,
)
from .multiclass import certain_labels, label_index, problem_targets
from .rbf_scoring import (
    decision_error_bound,
    exp_float32,
    rbf_exponent,
    rbf_product,
    rbf_support_factor,
)
from .solvers.active_set import active_set_solve
from .solvers.batched_smo import batched_smo_solve
from .solvers.kernel_cache import KernelRowCache
from .solvers.lockstep_smo import LockstepResult, distance_matrix, lockstep_smo
from .solvers.smo import (
    DualDivergence,
    SMOResult,
    default_max_iter,
    dual_objective,
    intercept_rule,
    smo_solve,
)

ACTIVE_SET_MAX_ROWS = 1500
"""Binary problems with fewer rows (at least ``ACTIVE_SET_MIN_ROWS``, finite C, a positive
semi-definite kernel, no max_iter) start with a short SMO probe and may go on with the primal-dual
active-set solver (``solvers.active_set``). Measured on make_classification(n, 20): 1.2-1.7x faster
than SMO below 1000 rows, even at 1500, slower from 2000 (the Cholesky of a large free set)."""

ACTIVE_SET_MIN_ROWS = 200
"""Smaller problems stay with SMO: it finishes them in about 1 ms, a few active-set rounds' fixed
cost (measured on wine pairs, 130 rows: 1.1-1.2x slower with the active sets)."""

ACTIVE_SET_MIN_FEATURES = 8
"""Problems whose centred features span fewer dimensions (:func:`rank_at_least`) stay with SMO: the
rbf Gram matrix of a low-dimensional sample is numerically low-rank, so Q_FF of the free set fails
the pivot test or the rounds cycle (measured on iris, moons, make_classification with 3 and 5
features, and with 10 features of rank 2: every attempt gave up, costing 5-60 % more than SMO)."""

PROBE_FRACTION = 12
"""SMO runs n // PROBE_FRACTION steps first. If it has not converged and most of the points it moved
are free (:func:`_hand_over`), its sets seed the active sets (1-5 rounds instead of 7-13), and SMO
resumes from it, with its row cache, when they give up; otherwise SMO goes on in the same run.
Probes with more points at C than free (small C, where SMO is quick) gave 1.2-1.7x slower fits with
the rounds. Fit time over SMO alone, breast cancer / digits / make_classification(800, 20,
flip_y=0.2) at C = 1, 10, 100: n // 6 1.01-0.97-1.00, 0.87-0.88-0.69, 0.55-0.87-0.56; n // 12
1.00-0.92-1.02, 0.76-0.78-0.67, 0.46-0.79-0.53; n // 24 loses digits at C = 1 (1.00)."""

BATCHED_MIN_ROWS = 8000
"""Binary problems with at least this many rows use the batched working-set solver; smaller ones
the one-pair SMO (per step it is lighter in Python, and its row cache holds most of the kernel)."""

FLOAT32_MIN_ENTRIES = 4096
"""rbf ``predict`` screens with float32 exponentials (``rbf_scoring``) from this many kernel
entries (rows × support vectors): below it the screen's fixed cost (a few µs) outweighs what the
float32 exp saves (about 3.5 ns an entry: 5 ns in float64, 1.4 ns in float32 with AVX2)."""

LOCKSTEP_MIN_PROBLEMS = 10
"""One-vs-one rbf fits with at least this many problems (5 classes) go through
``solvers.lockstep_smo``, all problems in the same numpy calls; fewer are solved one by one (wine's
and iris's 3 problems: 1.5x slower in lockstep, its calls then carry little work each)."""

LOCKSTEP_MAX_ROWS = 3000
"""Largest training set of a lockstep fit: its float32 kernel matrix of all rows (36 MB at 3,000)
must also fit in ``cache_mb``; larger sets are solved one problem at a time."""

LOCKSTEP_PROBE_FRACTION = 4
"""Lockstep problems take n // this many steps before the active-set hand-over test: a lockstep
step costs a few µs per problem, a third of a lone SMO step, so the probe runs longer."""

LOCKSTEP_BLOCK_ROWS = 512

FLOAT32_EXPONENT_MAX_ERROR = 1e-3
"""rbf kernel blocks are products in float32 (twice as fast) only when the exponents' error bound
is below this: the bound is 6e-4 on standardised digits and 1e-4 on breast cancer (worst pairs;
typical errors are ~√d times smaller); far-flung data or a large gamma (say 5e5 for γ‖x‖²) would
make float32's cancellation shift even k(x, x) by several per cent, so those take float64."""
"""Rows of the lockstep kernel matrix computed per product (bounds the temporaries)."""

PREDICT_BLOCK_MB = 64.0
"""Memory budget of one block of K(X, support vectors) at predict time."""


@dataclass
class BinaryKernelModel:
    """One fitted binary problem: f(x) = Σ_s coef_s K(sv_s, x) + intercept."""

    support: np.ndarray  # indices into the rows the problem was fitted on
    support_vectors: np.ndarray
    coef: np.ndarray  # y_s α_s
    intercept: float
    objective: float
    n_iter: int
    converged: bool


RANK_SAMPLE_ROWS = 128
"""Rows (evenly spaced, at most this many) that :func:`rank_at_least` looks at."""


@functools.cache
def _gaussian_sketch(d: int, k: int) -> np.ndarray:
    """A fixed d × k standard Gaussian matrix (seed 0), made once per shape."""
    return np.random.default_rng(0).standard_normal((d, k))


def rank_at_least(X: np.ndarray, k: int) -> bool:
    """Whether the centred X has rank ≥ k: the k × k Gram matrix of (X − x̄)G, G a fixed Gaussian
    d × k matrix, has no eigenvalue below 1e-12 of its largest (singular values below 1e-6), on
    ``RANK_SAMPLE_ROWS`` of the rows."""
    if min(X.shape) < k:
        return False
    sketch = X[:: -(-X.shape[0] // RANK_SAMPLE_ROWS)] @ _gaussian_sketch(X.shape[1], k)
    sketch -= sketch.mean(axis=0)
    eig = np.linalg.eigvalsh(sketch.T @ sketch)
    return bool(eig[0] > 1e-12 * eig[-1])


def _mostly_free(alpha: np.ndarray, C: float) -> bool:
    """At least two α_t free (0 < α_t < C), and no fewer free than at C."""
    n_free = int(np.count_nonzero((alpha > 0.0) & (alpha < C)))
    return n_free >= max(2, int(np.count_nonzero(alpha >= C)))


def _hand_over(alpha: np.ndarray, X: np.ndarray, C: float) -> bool:
    """Whether SMO's α should seed the active sets: :func:`_mostly_free` and features of rank
    ≥ ``ACTIVE_SET_MIN_FEATURES``."""
    return _mostly_free(alpha, C) and rank_at_least(X, ACTIVE_SET_MIN_FEATURES)


def _rows_of(D: np.ndarray, rows: np.ndarray) -> Callable[..., None]:
    """``block(idx, out)`` writing the problem's kernel rows 1 − D[rows[idx], rows] (rbf)."""

    def block(idx: np.ndarray, out: np.ndarray, cols: np.ndarray | None = None) -> None:
        picked = rows if cols is None else rows[cols]
        # two takes: half the time of one np.ix_ gather
        np.subtract(1.0, D.take(rows[idx], axis=0).take(picked, axis=1), out=out)

    return block


class KernelSVM(SVMClassifierBase):
    """Kernel support-vector classifier: the libsvm C-SVC dual by SMO with WSS3.

    Minimises ½ αᵀQα − eᵀα subject to yᵀα = 0 and 0 ≤ α ≤ C (Q_ij = y_i y_j k(x_i, x_j)) with the
    second-order working-set selection of Fan, Chen & Lin (2005): one pair at a time with a bounded
    kernel-row cache below ``BATCHED_MIN_ROWS`` rows, else on batched working sets with float32
    kernel blocks and shrinking (``solvers.batched_smo``). From ``ACTIVE_SET_MIN_ROWS`` to
    ``ACTIVE_SET_MAX_ROWS`` rows (finite C, not sigmoid, ``max_iter=None``, features of rank ≥ 8)
    a short SMO probe that leaves mostly free points hands them to a primal-dual active-set solver
    (``solvers.active_set``; SMO resumes when it gives up), which meets the same stopping rule.

    Parameters
    ----------
    C : float, default=1.0
        Box bound of the dual (penalty of the hinge loss); ``float("inf")`` is the hard margin
        (``fit`` raises ``NotSeparableError`` when the kernel does not separate the classes).
    kernel : {"linear", "poly", "rbf", "sigmoid"} or callable, default="rbf"
        ``poly`` is (gamma x'z + coef0)^degree, ``rbf`` exp(-gamma ||x - z||²), ``sigmoid``
        tanh(gamma x'z + coef0); a callable maps (X (n, d), Z (m, d)) to the (n, m) Gram matrix.
    gamma : {"scale", "auto"} or float, default="scale"
        "scale" = 1 / (n_features X.var()) on the training X, "auto" = 1 / n_features.
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=0.0
        Constant of the polynomial and sigmoid kernels (poly is homogeneous when 0).
    tol : float, default=1e-3
        Stopping tolerance on the maximal KKT violation m(α) − M(α) (libsvm's eps).
    max_iter : int or None, default=None
        SMO iteration cap per binary problem; None is libsvm's max(10⁷, 100 n).
    cache_mb : float, default=200
        Memory budget of the kernel rows of each binary problem (float64 row cache for small
        problems, the float32 rows of the batched working set for large ones).
    multiclass : {"ovo", "ovr"}, default="ovo"
        One-vs-one (votes, ties by summed confidence) or one-vs-rest (largest decision value).
    probability : bool, default=False
        Fit Platt's sigmoid on internal 5-fold decision values (multiclass: pairwise coupling for
        OvO, normalised OvR) and enable ``predict_proba``.
    random_state : int, RandomState or None, default=None
        Seeds the folds of the probability calibration.
    n_jobs : int or None, default=None
        joblib workers for the binary problems and their Platt folds (independent fits); None
        means 1 unless a ``joblib.parallel_config`` says otherwise. Results do not depend on it.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Sorted class labels.
    support_ : ndarray of shape (n_SV,)
        Sorted indices into the training X of the union of the support vectors of all problems.
    support_vectors_ : ndarray of shape (n_SV, n_features)
        ``X[support_]``.
    dual_coef_ : ndarray of shape (n_problems, n_SV)
        Row p holds y_s α_s of binary problem p (``binary_problems_[p]``, +1 = its positive class)
        for each support vector s, 0 where s is not a support vector of p. Decision of problem p:
        ``dual_coef_[p] @ K(support_vectors_, x) + intercept_[p]``; binary: one row, > 0 means
        ``classes_[1]``.
    intercept_ : ndarray of shape (n_problems,)
        Intercepts b_p (libsvm's −rho).
    n_support_ : ndarray of shape (n_classes,)
        Number of support vectors of each class.
    objective_ : ndarray of shape (n_problems,)
        Dual objective ½ αᵀQα − eᵀα at the solution of each problem.
    n_iter_ : ndarray of shape (n_problems,)
        Iterations of each problem: SMO steps (plus the active-set rounds where that solver
        finished after the SMO probe).
    binary_problems_ : list of (int, int)
        (positive, negative) class indices of each problem (negative −1 = rest).
    """

    def __init__(
        self,
        C: float = 1.0,
        kernel: str | Callable[..., Any] = "rbf",
        gamma: str | float = "scale",
        degree: int = 3,
        coef0: float = 0.0,
        tol: float = 1e-3,
        max_iter: int | None = None,
        cache_mb: float = 200.0,
        multiclass: str = "ovo",
        probability: bool = False,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.tol = tol
        self.max_iter = max_iter
        self.cache_mb = cache_mb
        self.multiclass = multiclass
        self.probability = probability
        self.random_state = random_state
        self.n_jobs = n_jobs

    # -- parameters ------------------------------------------------------------------------------
    def _validate_params_extra(self, X: np.ndarray) -> None:
        if not callable(self.kernel) and self.kernel not in KERNELS:
            raise BsvmValueError(
                f"kernel must be one of {KERNELS} or a callable, got {self.kernel!r}."
            )
        if (
            isinstance(self.degree, bool)
            or not isinstance(self.degree, int | np.integer)
            or self.degree < 0
        ):
            raise BsvmValueError(f"degree must be a non-negative integer, got {self.degree!r}.")
        if not isinstance(self.coef0, int | float | np.number) or not np.isfinite(self.coef0):
            raise BsvmValueError(f"coef0 must be a finite number, got {self.coef0!r}.")
        if not isinstance(self.tol, int | float | np.number) or not self.tol > 0:
            raise BsvmValueError(f"tol must be a positive number, got {self.tol!r}.")
        if self.max_iter is not None and (
            isinstance(self.max_iter, bool)
            or not isinstance(self.max_iter, int | np.integer)
            or self.max_iter < 1
        ):
            raise BsvmValueError(
                f"max_iter must be None or an integer >= 1, got {self.max_iter!r}."
            )
        if not isinstance(self.cache_mb, int | float | np.number) or not self.cache_mb > 0:
            raise BsvmValueError(f"cache_mb must be a positive number, got {self.cache_mb!r}.")
        self._gamma = resolve_gamma(self.gamma, X)
        self._check_kernel_range(X)

    def _check_kernel_range(self, X: np.ndarray) -> None:
        """Refuse parameters whose kernel values or dual gradients would overflow float64.

        With s = max ‖x‖² (finite: ``check_squares_finite``), |γ x'z| and γ‖x − z‖² are at most
        4γs, |K| is at most s (linear), (γs + |coef0|)^degree (poly) or 1 (rbf, sigmoid), a
        dual gradient is at most n C max|K| and the dual objective ½αᵀQα at most ½(nC)² max|K|;
        each must stay below max/16.
        """
        if callable(self.kernel):
            return
        n = X.shape[0]
        limit = FLOAT_MAX / 16.0
        s = float(np.max(np.einsum("ij,ij->i", X, X), initial=0.0))
        if 4.0 * self._gamma * s > limit:
            raise DataRangeError(
                f"gamma={self._gamma:.3g} times the squared norms of X (up to {s:.3g}) overflows "
                "float64 in the kernel; lower gamma or rescale the features."
            )
        k_max = {"linear": s, "rbf": 1.0, "sigmoid": 1.0}.get(self.kernel, 1.0)
        if self.kernel == "poly":
            base = self._gamma * s + abs(float(self.coef0))
            if base > 1.0 and self.degree * math.log(base) > math.log(limit / n):
                raise DataRangeError(
                    f"poly kernel values (gamma x'z + coef0)^degree reach {base:.3g}^{self.degree}, "
                    "which overflows float64; lower degree, gamma or coef0, or rescale the features."
                )
            k_max = base**self.degree
        C = float(self.C)
        if math.isfinite(C) and n * C > math.sqrt(limit / max(k_max, 1.0)):
            raise DataRangeError(
                f"C={C:.3g} with {n} samples and kernel values up to {k_max:.3g} overflows "
                "float64 in the dual objective ½αᵀQα (up to ½(nC)² max|K|); lower C (or use "
                "C=inf for a hard margin) or rescale the features."
            )

    def _kernel_args(self) -> dict[str, Any]:
        return {"gamma": self._gamma, "degree": self.degree, "coef0": self.coef0}

    # -- fitting ---------------------------------------------------------------------------------
    def _fit_binary(self, X: np.ndarray, y_pm: np.ndarray, seed: int) -> BinaryKernelModel:
        C = float(self.C)
        diagonal = kernel_diagonal(X, self.kernel, **self._kernel_args())
        if not np.all(np.isfinite(diagonal)):
            raise DataRangeError(
                "The kernel gives non-finite values k(x, x) on the training data; rescale the "
                "features or change the kernel's parameters."
            )
        try:
            # the kernel blocks are thin ((q, d + 2) × (d + 2, n)): threaded OpenBLAS was slower,
            # 3× at n = 20k on the shared 2-core machine
            with single_blas_thread():
                res = self._solve_dual(X, y_pm, C)
        except DualDivergence as err:
            raise NotSeparableError(
                "The data are not separable by this kernel, so the hard-margin SVM (C=inf) has no "
                f"solution ({err}). Use a finite C, e.g. C=1.0."
            ) from None
        return self._binary_model(X, y_pm, res, C)

    def _binary_model(
        self, X: np.ndarray, y_pm: np.ndarray, res: SMOResult, C: float
    ) -> BinaryKernelModel:
        """The fitted binary model of a dual solution; warns or raises when it did not converge."""
        if not res.converged:
            if math.isinf(C):
                raise NotSeparableError(
                    f"The hard-margin SVM (C=inf) did not converge within {res.n_iter} iterations: "
                    "the data are most likely not separable by this kernel. Use a finite C."
                )
            warnings.warn(
                f"SMO stopped at max_iter={res.n_iter} before reaching tol={self.tol}.",
                ConvergenceWarning,
                stacklevel=4,
            )
        if not (np.isfinite(res.objective) and np.isfinite(res.intercept)):
            raise DataRangeError(
                "SMO reached a non-finite objective or intercept (kernel values or gradients "
                "overflowed); rescale the features or change the kernel's parameters."
            )
        support = np.flatnonzero(res.alpha > 0.0)
        return BinaryKernelModel(
            support=support,
            support_vectors=X[support],
            coef=res.alpha[support] * y_pm[support],
            intercept=res.intercept,
            objective=res.objective,
            n_iter=res.n_iter,
            converged=res.converged,
        )

    def _float32_blocks(self, X: np.ndarray) -> bool:
        """rbf kernel blocks may be computed in float32: the exponents' error bound
        (``kernels.float32_exponent_error``) is at most ``FLOAT32_EXPONENT_MAX_ERROR``."""
        return (
            self.kernel == "rbf"
            and float32_exponent_error(X, self._gamma) <= FLOAT32_EXPONENT_MAX_ERROR
        )

    def _fit_jointly(
        self, X: np.ndarray, problems: list[tuple[np.ndarray, np.ndarray]]
    ) -> list[BinaryKernelModel] | None:
        """One-vs-one rbf problems solved together by ``solvers.lockstep_smo`` over one kernel
        matrix of all rows, when there are enough of them and the matrix fits in ``cache_mb``."""
        n = X.shape[0]
        C = float(self.C)
        if (
            self.kernel != "rbf"
            or len(problems) < LOCKSTEP_MIN_PROBLEMS
            or n > LOCKSTEP_MAX_ROWS
            or 4 * n * n > float(self.cache_mb) * 2**20
            or not math.isfinite(C)
            or self.max_iter is not None
            or self.n_jobs not in (None, 1)
        ):
            return None
        D = np.empty((n, n), dtype=np.float32)
        if self._float32_blocks(X):
            block = kernel_block_function(X, "rbf", **self._kernel_args(), dtype=np.float32)
        else:  # float64 exponents, float32 exponential (rbf_scoring's bound)
            center, right = rbf_support_factor(X, self._gamma)

            def block(idx: np.ndarray, out: np.ndarray) -> None:
                out[...] = exp_float32(rbf_product(X[idx], center, right, self._gamma))

        with single_blas_thread():
            for start in range(0, n, LOCKSTEP_BLOCK_ROWS):
                rows = np.arange(start, min(start + LOCKSTEP_BLOCK_ROWS, n))
                block(rows, D[start : rows[-1] + 1])
        np.fill_diagonal(D, 1.0)  # k(x, x) = 1 exactly, whatever the exponent's rounding
        distance_matrix(D)
        rows = [np.flatnonzero(mask) for mask, _ in problems]
        jobs = [(r, y_pm) for r, (_, y_pm) in zip(rows, problems, strict=True)]
        # as one at a time: a probe of n // PROBE_FRACTION steps may hand over to active sets
        probe_steps = [
            max(1, r.size // LOCKSTEP_PROBE_FRACTION)
            if ACTIVE_SET_MIN_ROWS <= r.size < ACTIVE_SET_MAX_ROWS
            else default_max_iter(r.size)
            for r in rows
        ]
        solved: list[LockstepResult | None] = list(
            lockstep_smo(D, jobs, C, tol=float(self.tol), steps=probe_steps)
        )
        budget = max(float(self.cache_mb) - D.nbytes / 2**20, 0.0)
        # the rank test once, on all rows (85 µs a problem): a pair of classes of lower rank only
        # makes its active sets give up, and the lockstep SMO finishes it
        full_rank = rank_at_least(X, ACTIVE_SET_MIN_FEATURES)
        resume, by_active_set = [], {}
        for p, sol in enumerate(solved):
            if sol is None or sol.converged:
                continue
            if sol.n_iter >= probe_steps[p] and full_rank and _mostly_free(sol.alpha, C):
                res = active_set_solve(
                    _rows_of(D, rows[p]),
                    np.ones(rows[p].size),
                    jobs[p][1],
                    C,
                    tol=float(self.tol),
                    cache_mb=budget,
                    start=SMOResult(sol.alpha, 0.0, 0.0, sol.n_iter, False, 0, sol.grad),
                )
                if res is not None:
                    res.n_iter += sol.n_iter
                    by_active_set[p] = res
                    continue
            resume.append(p)
        if resume:
            rest = lockstep_smo(
                D,
                [jobs[p] for p in resume],
                C,
                tol=float(self.tol),
                starts=[solved[p] for p in resume],
            )
            for p, sol in zip(resume, rest, strict=True):
                solved[p] = sol
        del D
        models = []
        for p, ((mask, y_pm), sol) in enumerate(zip(problems, solved, strict=True)):
            assert sol is not None
            res = by_active_set.get(p) or SMOResult(
                alpha=sol.alpha,
                intercept=intercept_rule(sol.alpha, sol.grad, y_pm, C),
                objective=dual_objective(sol.alpha, sol.grad, y_pm),
                n_iter=sol.n_iter,
                converged=sol.converged,
                n_kernel_rows=0,
            )
            models.append(self._binary_model(X[mask], y_pm, res, C))
        return models

    def _solve_dual(self, X: np.ndarray, y_pm: np.ndarray, C: float) -> SMOResult:
        """The dual by batched working sets (large problems), else active sets, else one-pair SMO."""
        kw = self._kernel_args()
        diag = kernel_diagonal(X, self.kernel, **kw)
        common = {
            "tol": float(self.tol),
            "max_iter": self.max_iter,
            "cache_mb": float(self.cache_mb),
        }
        if y_pm.size >= BATCHED_MIN_ROWS:
            rbf64 = self.kernel == "rbf" and not self._float32_blocks(X)
            dtype = np.float64 if rbf64 else np.float32
            block = kernel_block_function(X, self.kernel, **kw, dtype=dtype)
            return batched_smo_solve(block, diag, y_pm, C, dtype=dtype, **common)
        row = kernel_row_function(X, self.kernel, **kw)
        smo_args = {"floor_curvature": self.kernel != "rbf", **common}
        if (
            ACTIVE_SET_MIN_ROWS <= y_pm.size < ACTIVE_SET_MAX_ROWS
            and X.shape[1] >= ACTIVE_SET_MIN_FEATURES
            and math.isfinite(C)
            and self.max_iter is None
            and self.kernel != "sigmoid"
        ):
            # SMO alone unless, after its first n // PROBE_FRACTION steps, the sets look ready
            cache = KernelRowCache(row, y_pm.size, float(self.cache_mb))
            hand_over = (
                max(1, y_pm.size // PROBE_FRACTION),
                functools.partial(_hand_over, X=X, C=C),
            )
            probe = smo_solve(row, diag, y_pm, C, cache=cache, stop_if=hand_over, **smo_args)
            if probe.converged:
                return probe
            # rbf: float32 blocks (SIMD exponential), relative error 1e-7 as libsvm's cache
            dtype = np.float32 if self._float32_blocks(X) else np.float64
            block = kernel_block_function(X, self.kernel, **kw, dtype=dtype)
            res = active_set_solve(
                block,
                diag,
                y_pm,
                C,
                tol=float(self.tol),
                # one budget for both: the probe's rows stay alive for a resumed SMO
                cache_mb=max(float(self.cache_mb) - cache.nbytes / 2**20, 0.0),
                block_dtype=dtype,
                start=probe,
            )
            if res is not None:
                res.n_iter += probe.n_iter
                return res
            return smo_solve(row, diag, y_pm, C, start=probe, cache=cache, **smo_args)
        return smo_solve(row, diag, y_pm, C, **smo_args)

    def _after_fit(self, X: np.ndarray, y_idx: np.ndarray) -> None:
        global_support = []
        for problem, model in zip(self.binary_problems_, self.binary_models_, strict=True):
            rows = np.flatnonzero(problem_targets(y_idx, problem)[0])
            global_support.append(rows[model.support])
        self.support_ = np.unique(np.concatenate(global_support))
        self.support_vectors_ = X[self.support_]
        self._support_sq = np.einsum("ij,ij->i", self.support_vectors_, self.support_vectors_)
        self.dual_coef_ = np.zeros((len(self.binary_models_), self.support_.size))
        for p, (idx, model) in enumerate(zip(global_support, self.binary_models_, strict=True)):
            self.dual_coef_[p, np.searchsorted(self.support_, idx)] = model.coef
        self.intercept_ = np.array([m.intercept for m in self.binary_models_])
        self.objective_ = np.array([m.objective for m in self.binary_models_])
        self.n_iter_ = np.array([m.n_iter for m in self.binary_models_])
        self.n_support_ = np.bincount(y_idx[self.support_], minlength=self.classes_.size).astype(
            np.int32
        )
        self._rbf_right = None
        if self.kernel == "rbf":
            self._set_rbf_scoring()

    # -- decision --------------------------------------------------------------------------------
    def _decision_binary(self, model: BinaryKernelModel, X: np.ndarray) -> np.ndarray:
        return self._kernel_times(X, model.support_vectors, model.coef[:, None])[:, 0] + (
            model.intercept
        )

    def _decision_matrix(self, X: np.ndarray, float32_exp: bool = False) -> np.ndarray:
        """All problems at once: K(X, union of support vectors) @ dual_coef_ᵀ + intercept_.

        rbf takes the exponents from one product (``rbf_scoring``); with ``float32_exp`` their
        exponential is taken in float32, within ``rbf_scoring.KERNEL_ERROR`` per kernel entry.
        """
        S, W = self.support_vectors_, self.dual_coef_.T
        if self.kernel == "rbf" and S.shape[0]:
            return self._rbf_times(X, W, float32_exp) + self.intercept_
        return self._kernel_times(X, S, W, getattr(self, "_support_sq", None)) + self.intercept_

    def _rbf_scoring(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(c, R, error): ``rbf_scoring``'s factor of the support vectors and the float32 error
        bound of each problem; made at fit (models saved before they were kept: made here)."""
        if getattr(self, "_rbf_right", None) is None:
            self._set_rbf_scoring()
        return self._rbf_center, self._rbf_right, self._rbf_error

    def _set_rbf_scoring(self) -> None:
        self._rbf_center, self._rbf_right = rbf_support_factor(self.support_vectors_, self._gamma)
        self._rbf_error = decision_error_bound(self.dual_coef_.T)

    def _rbf_times(self, X: np.ndarray, W: np.ndarray, float32_exp: bool) -> np.ndarray:
        """K(X, support vectors) @ W for rbf, in row blocks of at most ``PREDICT_BLOCK_MB``."""
        center, right, _ = self._rbf_scoring()
        block = max(1, int(PREDICT_BLOCK_MB * 2**20 // (8 * right.shape[1])))
        if X.shape[0] <= block:
            return self._rbf_kernel(X, center, right, float32_exp) @ W
        out = np.empty((X.shape[0], W.shape[1]))
        for start in range(0, X.shape[0], block):
            rows = slice(start, min(start + block, X.shape[0]))
            np.dot(self._rbf_kernel(X[rows], center, right, float32_exp), W, out=out[rows])
        return out

    def _rbf_kernel(
        self, X: np.ndarray, center: np.ndarray, right: np.ndarray, float32_exp: bool
    ) -> np.ndarray:
        if float32_exp:
            return exp_float32(rbf_product(X, center, right, self._gamma))
        A = rbf_exponent(X, center, right, self._gamma)
        return np.exp(A, out=A)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels, shape (n_samples,).

        rbf screens with float32 exponentials (``rbf_scoring``): a row whose label the error
        bound cannot settle is scored again in float64, so the labels are those of the float64
        decision values.
        """
        check_fitted(self, "binary_models_")
        X = check_predict_data(self, X)
        problems, n_classes = self.binary_problems_, self.classes_.size
        screen = (
            self.kernel == "rbf"
            and X.shape[0] * self.support_vectors_.shape[0] >= FLOAT32_MIN_ENTRIES
        )
        if not screen:
            return self.classes_[label_index(self._decision_matrix(X), problems, n_classes)]
        D = self._decision_matrix(X, float32_exp=True)
        error = self._rbf_scoring()[2]
        labels, certain = certain_labels(D, error, problems, n_classes)
        if not certain.all():
            redo = np.flatnonzero(~certain)
            labels[redo] = label_index(self._decision_matrix(X[redo]), problems, n_classes)
        return self.classes_[labels]

    def _kernel_times(
        self, X: np.ndarray, S: np.ndarray, W: np.ndarray, s_sq: np.ndarray | None = None
    ) -> np.ndarray:
        """K(X, S) @ W computed in row blocks of at most ``PREDICT_BLOCK_MB`` megabytes.

        ``s_sq`` are S's squared row norms when known (models fitted before it was kept: None).
        """
        if S.shape[0] == 0:
            return np.zeros((X.shape[0], W.shape[1]))
        block = max(1, int(PREDICT_BLOCK_MB * 2**20 // (8 * S.shape[0])))
        kw = self._kernel_args()
        if X.shape[0] <= block:
            return kernel_matrix(X, S, self.kernel, **kw, z_sq=s_sq) @ W
        out = np.empty((X.shape[0], W.shape[1]))
        for start in range(0, X.shape[0], block):
            stop = min(start + block, X.shape[0])
            out[start:stop] = kernel_matrix(X[start:stop], S, self.kernel, **kw, z_sq=s_sq) @ W
        return out
