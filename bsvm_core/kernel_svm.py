"""KernelSVM: the C-SVC dual (solvers chosen by ``kernel_dual``), decisions and screened labels."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._blas import single_blas_thread
from ._einsum import einsum
from ._svm_base import SVMClassifierBase
from ._validation import FLOAT_MAX
from .exceptions import BsvmValueError, ConvergenceWarning, DataRangeError, NotSeparableError
from .kernel_decision import KernelDecisions
from .kernel_dual import shared_matrix_applies, solve_dual, solve_on_shared_matrix
from .kernel_lockstep import lockstep_applies, solve_in_lockstep
from .kernels import (
    KERNELS,
    kernel_diagonal,
    resolve_gamma,
)
from .multiclass import REST
from .solvers.smo import (
    DualDivergence,
    SMOResult,
)

_NOT_SEPARABLE = (
    "The data are not separable by this kernel, so the hard-margin SVM (C=inf) has no "
    "solution ({err}). Use a finite C, e.g. C=1.0."
)


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


DENSE_SCATTER_MAX_ENTRIES = 2**18
"""``_support_union`` scatters the coefficients into a (problems, n) matrix of zeros up to this
many entries (2 MB; wine's 3 × 178: ~7 against ~11 µs), else into their union's columns."""


def _support_union(
    n: int, supports: list[np.ndarray], coefs: list[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """(support_, dual_coef_): the sorted union of the problems' rows ``supports`` (of n), no
    np.unique (~40 µs), and the (problems, union) matrix whose row p holds ``coefs[p]`` at
    ``supports[p]``'s columns, 0 elsewhere."""
    marked = np.zeros(n, dtype=bool)
    if len(supports) * n <= DENSE_SCATTER_MAX_ENTRIES:
        full = np.zeros((len(supports), n))
        for row, idx, coef in zip(full, supports, coefs, strict=True):
            row[idx] = coef
            marked[idx] = True
        union = marked.nonzero()[0]
        return union, full.take(union, axis=1)
    for idx in supports:
        marked[idx] = True
    union = marked.nonzero()[0]
    column = np.empty(n, dtype=np.intp)  # each support vector's column
    column[union] = np.arange(union.size)
    dual_coef = np.zeros((len(supports), union.size))
    for row, idx, coef in zip(dual_coef, supports, coefs, strict=True):
        row[column[idx]] = coef  # a row's own gather: ~4x faster than [p, columns]
    return union, dual_coef


class KernelSVM(KernelDecisions, SVMClassifierBase):
    """Kernel support-vector classifier: the libsvm C-SVC dual by SMO with WSS3.

    Minimises ½ αᵀQα − eᵀα subject to yᵀα = 0 and 0 ≤ α ≤ C (Q_ij = y_i y_j k(x_i, x_j)) with the
    second-order working-set selection of Fan, Chen & Lin (2005): one pair at a time with a bounded
    kernel-row cache below ``BATCHED_MIN_ROWS`` rows, else on batched working sets with float32
    kernel blocks and shrinking (``solvers.batched_smo``). From ``ACTIVE_SET_MIN_ROWS`` to
    ``ACTIVE_SET_MAX_ROWS`` rows (finite C, not sigmoid, ``max_iter=None``, features of rank ≥ 8)
    a short SMO probe that leaves mostly free points hands them to a primal-dual active-set solver
    (``solvers.active_set``; SMO resumes when it gives up), which meets the same stopping rule.
    One-vs-one rbf fits of many problems take the probe and the active-set rounds of all problems
    at once (``solvers.lockstep_smo``, ``solvers.lockstep_active_set``), from
    ``kernel_lockstep.LOCKSTEP_ACTIVE_SET_MIN_ROWS`` rows a problem.

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

    _binary_fit_takes_seed = False  # the dual's solvers are deterministic

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
        coef0 = self.coef0
        if not (
            math.isfinite(coef0)  # a float (the usual case): no ufunc call (~0.4 µs)
            if type(coef0) is float
            else isinstance(coef0, int | float | np.number) and np.isfinite(coef0)
        ):
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

        ``check_squares_finite`` has passed (n d max|x|² ≤ max/16), so s ≤ d max|x|² ≤ max/(16 n)
        and 4γs ≤ max/16 whenever γ ≤ n/4: rbf and sigmoid (|K| ≤ 1 whatever s is) skip s for
        γ ≤ n/8 (a factor 2 for the rounding of s and of that bound).
        """
        if callable(self.kernel):
            return
        n = X.shape[0]
        limit = FLOAT_MAX / 16.0
        if self.kernel in ("rbf", "sigmoid") and self._gamma <= n / 8.0:
            s = 0.0  # not needed: 4γs is within the limit and k_max is 1
        else:
            s = float(einsum("ij,ij->i", X, X).max(initial=0.0))
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
        self._check_diagonal(X)
        try:
            # the kernel blocks are thin ((q, d + 2) × (d + 2, n)): threaded OpenBLAS was slower,
            # 3× at n = 20k on the shared 2-core machine
            with single_blas_thread():
                res = solve_dual(
                    X,
                    y_pm,
                    C,
                    self.kernel,
                    self._kernel_args(),
                    float(self.tol),
                    self.max_iter,
                    float(self.cache_mb),
                )
        except DualDivergence as err:
            raise NotSeparableError(_NOT_SEPARABLE.format(err=err)) from None
        return self._binary_model(X, y_pm, res, C)[0]

    def _check_diagonal(self, X: np.ndarray) -> None:
        """Refuse a kernel whose values k(x, x) on the training rows are not finite (rbf's are 1)."""
        if self.kernel == "rbf":
            return
        if not np.all(np.isfinite(kernel_diagonal(X, self.kernel, **self._kernel_args()))):
            raise DataRangeError(
                "The kernel gives non-finite values k(x, x) on the training data; rescale the "
                "features or change the kernel's parameters."
            )

    def _binary_model(
        self,
        X: np.ndarray,
        y_pm: np.ndarray,
        res: SMOResult,
        C: float,
        rows: np.ndarray | None = None,
    ) -> tuple[BinaryKernelModel, np.ndarray]:
        """The fitted binary model of a dual solution and X's rows of its support vectors; warns
        or raises when it did not converge. ``rows``: the problem's rows of X (None: all of them)."""
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
        if not (math.isfinite(res.objective) and math.isfinite(res.intercept)):  # floats
            raise DataRangeError(
                "SMO reached a non-finite objective or intercept (kernel values or gradients "
                "overflowed); rescale the features or change the kernel's parameters."
            )
        support = (res.alpha > 0.0).nonzero()[0]  # flatnonzero's wrappers: ~2 µs
        coef = res.alpha * y_pm  # then one gather: the products y_s α_s of two, bit for bit
        # take, not [ ]: the same copies without indexing's set-up (X's rows ~1 against ~3 µs)
        x_rows = support if rows is None else rows.take(support)
        model = BinaryKernelModel(
            support=support,
            support_vectors=X.take(x_rows, axis=0),
            coef=coef.take(support),
            intercept=res.intercept,
            objective=res.objective,
            n_iter=res.n_iter,
            converged=res.converged,
        )
        return model, x_rows

    def _fit_jointly(
        self, X: np.ndarray, problems: list[tuple[np.ndarray, np.ndarray]]
    ) -> list[BinaryKernelModel] | None:
        """Many problems solved together, or None: one at a time (joblib's when ``n_jobs`` asks).
        Many one-vs-one rbf problems go in lockstep (``kernel_lockstep.solve_in_lockstep``, not with
        ``max_iter`` or ``n_jobs``); where ``kernel_dual.shared_matrix_applies`` says so, they
        take their matrices from one kernel matrix of all rows, in this process whatever
        ``n_jobs`` is (``kernel_dual.solve_on_shared_matrix``: small fits, and the models must not
        depend on ``n_jobs``)."""
        C = float(self.C)
        n = X.shape[0]
        self._joint_support: list[np.ndarray] | None = None
        if callable(self.kernel):
            return None
        # X's rows of each problem, made once (None: all of them, one-vs-rest needs no map)
        rows = [None if y_pm.size == n else mask.nonzero()[0] for mask, y_pm in problems]
        if (
            self.max_iter is None
            and self.n_jobs in (None, 1)
            and lockstep_applies(n, len(problems), self.kernel, C, self.cache_mb)
        ):
            with single_blas_thread():  # the active sets' small factorisations and products
                solved = solve_in_lockstep(
                    X, problems, C, self._gamma, float(self.tol), float(self.cache_mb)
                )
        elif shared_matrix_applies(  # whatever n_jobs: the models must not depend on it
            n,
            len(problems),
            any(r is not None for r in rows),  # a problem of a subset of the rows
            self.kernel,
            self.cache_mb,
        ):
            self._check_diagonal(X)
            try:
                with single_blas_thread():  # one limit for all problems (~40 µs each)
                    solved = solve_on_shared_matrix(
                        X,
                        problems,
                        C,
                        self.kernel,
                        self._kernel_args(),
                        float(self.tol),
                        self.max_iter,
                        float(self.cache_mb),
                        rows,
                    )
            except DualDivergence as err:
                raise NotSeparableError(_NOT_SEPARABLE.format(err=err)) from None
        else:
            return None
        models, supports = [], []
        for (_, y_pm), res, x_problem in zip(problems, solved, rows, strict=True):
            model, x_rows = self._binary_model(X, y_pm, res, C, rows=x_problem)
            models.append(model)
            supports.append(x_rows)
        self._joint_support = supports  # X's rows of each support, for _after_fit
        return models

    def _after_fit(self, X: np.ndarray, y_idx: np.ndarray) -> None:
        global_support = self.__dict__.pop("_joint_support", None)  # known when fitted jointly
        if global_support is None:
            global_support = self._global_support(y_idx)
        if len(global_support) == 1:  # binary: one support, sorted, and its coefficients
            self.support_ = global_support[0].copy()
            self.dual_coef_ = self.binary_models_[0].coef[None, :].copy()
        else:
            self.support_, self.dual_coef_ = _support_union(
                X.shape[0], global_support, [model.coef for model in self.binary_models_]
            )
        self.support_vectors_ = X.take(self.support_, axis=0)
        self._support_sq = einsum("ij,ij->i", self.support_vectors_, self.support_vectors_)
        self.intercept_ = np.array([m.intercept for m in self.binary_models_])
        self.objective_ = np.array([m.objective for m in self.binary_models_])
        self.n_iter_ = np.array([m.n_iter for m in self.binary_models_])
        self.n_support_ = np.bincount(
            y_idx.take(self.support_), minlength=self.classes_.size
        ).astype(np.int32)
        self._rbf_kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # _rbf_scoring's

    def _global_support(self, y_idx: np.ndarray) -> list[np.ndarray]:
        """X's rows of each problem's support vectors, from the problems' classes."""
        if self.classes_.size == 2:  # the one problem holds every row, in order
            return [self.binary_models_[0].support]
        global_support = []
        members: list[np.ndarray] = []  # each class's rows, made once for one-vs-one
        for (pos, neg), model in zip(self.binary_problems_, self.binary_models_, strict=True):
            if neg == REST:  # one-vs-rest problems hold every row, in order
                global_support.append(model.support)
                continue
            if not members:
                members = [(y_idx == c).nonzero()[0] for c in range(self.classes_.size)]
            rows = np.concatenate((members[pos], members[neg]))
            rows.sort()  # the problem's rows in X's order, as its mask selects them
            global_support.append(rows[model.support])
        return global_support
