"""LinearSVM: the primal linear SVM behind a scikit-learn estimator (solvers in ``solvers/``).

``fit(X, y)`` learns from arrays in memory; ``fit_partitions(parts)`` learns the same model (the
same exact optimum and attributes) from a ``RowPartitions`` data set too big for one process,
e.g. held on the workers of a Dask cluster: the exact solver runs on per-partition sums and the
few rows near the margin (``solvers.linear_partitioned``), in a handful of passes.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ._blas import single_blas_thread_if
from ._svm_base import SVMClassifierBase
from ._validation import check_range
from .exceptions import BsvmValueError, ConvergenceWarning, DataRangeError
from .linear_rows import linear_rows
from .multiclass import binary_problems
from .partitions import RowPartitions
from .row_plans import RowPlan, svm_output
from .solvers.linear_exact import fit_linear_exact
from .solvers.linear_objective import LinearSolution
from .solvers.linear_partitioned import fit_linear_partitioned
from .solvers.subgradient import fit_linear_subgradient

SOLVERS = ("auto", "subgradient")
SINGLE_THREAD_SIZE = 200_000
"""From this many entries of X on, BLAS runs single-threaded inside the solvers: tall-skinny
products gain little from threads and lose much when other processes share the cores."""


class LinearSVM(SVMClassifierBase):
    """Linear support-vector classifier: min ½‖w‖² + C Σ max(0, 1 − y_i(w'x_i + b)), b unpenalised.

    This is libsvm's (and scikit-learn ``SVC(kernel="linear")``'s) objective, solved in the primal.
    scikit-learn's ``LinearSVC`` differs: it penalises the intercept.

    Parameters
    ----------
    C : float, default=1.0
        Weight of the hinge loss; ``float("inf")`` is the hard margin (raises
        ``NotSeparableError`` when no hyperplane separates the classes; solver "auto" only).
    solver : {"auto", "subgradient"}, default="auto"
        "auto": exact solver — Newton's method on a Huber-smoothed hinge with decreasing smoothing,
        finished by a primal-dual active-set solve of the KKT system; on large data it starts from
        a subsample's solution and goes on over the rows near the margin, checking the KKT
        conditions on all rows (``solvers.linear_exact``).
        "subgradient": the textbook primal subgradient method with Pegasos steps 1/(λt) and the
        intercept minimised out exactly (``solvers.subgradient``).
    fit_intercept : bool, default=True
        Learn the unpenalised intercept b; False fixes b = 0.
    tol : float, default=1e-4
        "subgradient": stop when the best objective improves by less than ``tol`` (relative) over
        10 iterations. "auto" stops at the exact optimum (KKT conditions to round-off); ``tol`` only
        judges its fallback (smoothing bound on the objective gap) on degenerate data.
    max_iter : int, default=1000
        "subgradient": iterations (full passes over the data). "auto": cap on Newton plus
        active-set steps, counted over the subsample warm start and the reduced problems too (a
        few dozen on small data, one or two hundred on large data, most of them on small reduced
        problems; only a handful pass over all rows).
    learning_rate : float or None, default=None
        "subgradient" only: η₀ of the schedule η_t = η₀ / (1 + η₀ λ t), λ = 1/(C n);
        None is Pegasos' η_t = 1 / (λ t).
    multiclass : {"ovr", "ovo"}, default="ovr"
        One-vs-rest (largest decision value) or one-vs-one (votes, ties by summed confidence).
    random_state : int, RandomState or None, default=None
        Seeds the folds of the probability calibration (the solvers are deterministic).
    probability : bool, default=False
        Fit Platt's sigmoid on internal 5-fold decision values and enable ``predict_proba``.
    n_jobs : int or None, default=None
        joblib workers for the binary problems and their Platt folds (independent fits); None
        means 1 unless a ``joblib.parallel_config`` says otherwise. Results do not depend on it.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Sorted class labels.
    coef_ : ndarray of shape (n_problems, n_features)
        w of each binary problem (one problem for two classes, positive class ``classes_[1]``).
    intercept_ : ndarray of shape (n_problems,)
        b of each binary problem.
    n_iter_ : ndarray of shape (n_problems,)
        Iterations each binary problem took.
    converged_ : ndarray of shape (n_problems,)
        Whether each binary problem met its stopping rule (a ``ConvergenceWarning`` otherwise).
    objective_ : ndarray of shape (n_problems,)
        Primal objective P(w, b) at the solution (½‖w‖² for the hard margin).
    binary_problems_ : list of (int, int)
        (positive, negative) class indices of each problem; negative −1 means "the rest".
    n_features_in_ : int
        Number of features seen in ``fit``.
    """

    def __init__(
        self,
        C: float = 1.0,
        solver: str = "auto",
        fit_intercept: bool = True,
        tol: float = 1e-4,
        max_iter: int = 1000,
        learning_rate: float | None = None,
        multiclass: str = "ovr",
        random_state: int | np.random.RandomState | None = None,
        probability: bool = False,
        n_jobs: int | None = None,
    ) -> None:
        self.C = C
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.multiclass = multiclass
        self.random_state = random_state
        self.probability = probability
        self.n_jobs = n_jobs

    def _validate_params_extra(self, X: np.ndarray) -> None:
        if self.solver not in SOLVERS:
            raise BsvmValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}.")
        if self.solver == "subgradient" and math.isinf(float(self.C)):
            raise BsvmValueError(
                "C=inf (hard margin) needs solver='auto'; the subgradient method has no finite "
                "objective to descend."
            )
        if not isinstance(self.fit_intercept, bool | np.bool_):
            raise BsvmValueError(f"fit_intercept must be a bool, got {self.fit_intercept!r}.")
        if not isinstance(self.tol, int | float | np.number) or not self.tol > 0:
            raise BsvmValueError(f"tol must be a positive number, got {self.tol!r}.")
        if (
            isinstance(self.max_iter, bool)
            or not isinstance(self.max_iter, int | np.integer)
            or self.max_iter < 1
        ):
            raise BsvmValueError(f"max_iter must be an integer >= 1, got {self.max_iter!r}.")
        lr = self.learning_rate
        if lr is not None and (not isinstance(lr, int | float | np.number) or not lr > 0):
            raise BsvmValueError(f"learning_rate must be None or a positive number, got {lr!r}.")

    def _fit_binary(self, X: np.ndarray, y: np.ndarray, seed: int) -> LinearSolution:
        C = float(self.C)
        with single_blas_thread_if(X.size >= SINGLE_THREAD_SIZE):
            if self.solver == "subgradient":
                sol = fit_linear_subgradient(
                    X,
                    y,
                    C,
                    bool(self.fit_intercept),
                    float(self.tol),
                    int(self.max_iter),
                    None if self.learning_rate is None else float(self.learning_rate),
                )
            else:
                sol = fit_linear_exact(
                    X, y, C, bool(self.fit_intercept), float(self.tol), int(self.max_iter)
                )
        return self._checked(sol)

    def fit_partitions(self, parts: RowPartitions) -> LinearSVM:
        """Fit on data held as row partitions (e.g. on Dask workers); the same model as ``fit``.

        The exact solver runs on sums over rows: a sample pass, a few Newton passes that bring
        back (d + 1)-vectors and (d + 1)² matrices, one pass gathering the rows near the margin
        and one checking the KKT conditions on every row (``solvers.linear_partitioned``); every
        binary problem shares each pass. ``n_passes_`` records the passes. ``solver`` must be
        "auto", ``probability`` False (Platt's folds need the rows), and ``n_jobs`` is unused
        (the partitions are the parallelism).

        Parameters
        ----------
        parts : RowPartitions
            The training rows and labels (``bsvm_core.partitions``).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._check_common_params()
        self._validate_params_extra(np.empty((0, parts.n_features)))
        if self.solver != "auto":
            raise BsvmValueError(
                "fit_partitions runs the exact solver (solver='auto'); the subgradient method "
                "would need one pass over the partitions per iteration."
            )
        if self.probability:
            raise BsvmValueError(
                "fit_partitions cannot fit Platt probabilities (probability=True): their "
                "held-out folds need the rows; fit with probability=False."
            )
        try:
            with single_blas_thread_if(parts.n_rows * parts.n_features >= SINGLE_THREAD_SIZE):
                fit = fit_linear_partitioned(
                    parts,
                    str(self.multiclass),
                    float(self.C),
                    bool(self.fit_intercept),
                    float(self.tol),
                    int(self.max_iter),
                )
        except BsvmValueError:
            raise
        except ValueError as err:
            raise BsvmValueError(str(err)) from err
        check_range(parts.n_rows, fit.n_features, fit.max_abs)
        self.n_features_in_ = fit.n_features
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.classes_ = fit.classes
        self.binary_problems_ = binary_problems(self.classes_.size, str(self.multiclass))
        self.binary_models_ = [self._checked(sol) for sol in fit.solutions]
        self.platt_ = None
        self.n_passes_ = fit.passes
        self._after_fit(np.empty((0, fit.n_features)), np.empty(0, dtype=np.intp))
        return self

    def _checked(self, sol: LinearSolution) -> LinearSolution:
        """The solution, if finite; warn when it missed its stopping rule."""
        if not (np.all(np.isfinite(sol.w)) and np.isfinite(sol.b)):
            raise DataRangeError(
                f"LinearSVM(solver={self.solver!r}) reached non-finite coefficients; rescale the "
                "features or lower C."
            )
        if not sol.converged:
            warnings.warn(
                f"LinearSVM(solver={self.solver!r}) stopped after {sol.n_iter} iterations "
                f"before meeting its tolerance; increase max_iter.",
                ConvergenceWarning,
                stacklevel=4,
            )
        return sol

    def _decision_binary(self, model: LinearSolution, X: np.ndarray) -> np.ndarray:
        return X @ model.w + model.b

    def _after_fit(self, X: np.ndarray, y_idx: np.ndarray) -> None:
        models = self.binary_models_
        self.coef_ = np.vstack([m.w for m in models])
        self.intercept_ = np.array([m.b for m in models])
        self.n_iter_ = np.array([m.n_iter for m in models])
        self.converged_ = np.array([m.converged for m in models])
        self.objective_ = np.array([m.objective for m in models])

    def _decision_matrix(self, X: np.ndarray) -> np.ndarray:
        return X @ self.coef_.T + self.intercept_

    def row_plan(
        self, mean: np.ndarray | None = None, scale: np.ndarray | None = None
    ) -> RowPlan | None:
        """The plan of D = z Wᵀ + b, z = (x − ``mean``) / ``scale`` (``linear_rows``); None
        unfitted."""
        if not hasattr(self, "coef_"):
            return None
        problems, n_classes = self.binary_problems_, self.classes_.size
        rows = linear_rows(self.coef_.T, self.intercept_, mean, scale)
        return RowPlan(rows, problems, n_classes, svm_output(n_classes, problems))
