"""BayesianSVM: the Polson & Scott (2011) data-augmentation SVM fitted by EM, ECME, Gibbs or
spike-and-slab Gibbs (bayes-svm.md). The maths lives in ``solvers/bayes_*``; this is the thin object.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_random_state

from ._validation import check_fit_data, check_fitted, check_predict_data, encode_labels
from .bayes_params import check_params, is_number
from .bayes_partitioned import PartitionFitMixin
from .bayesian_summary import (
    coefficient_draws,
    coefficient_means,
    decision_draws,
    feature_names,
    problem_names,
    summarise,
)
from .draw_quantiles import DEFAULT_MAX_BYTES, default_threads
from .exceptions import BsvmValueError, MCMCConvergenceWarning
from .linear_rows import linear_rows
from .mcmc_convergence import MIN_DRAWS, chain_diagnostics, convergence_message
from .multiclass import REST, binary_problems, label_index, ovo_votes, problem_targets
from .row_plans import RowPlan, svm_output
from .solvers.bayes_em import warm_point


def standardise(X: np.ndarray, centre: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, population SD, Z = (X − mean) / SD) per column; a constant column keeps SD 1.

    Columns whose magnitude could overflow a sum of squares are first divided by a power of two
    (exact), so data near the float64 limit (|x| up to 1.8e308) standardise without inf or NaN.
    """
    big = np.max(np.abs(X), axis=0, initial=0.0)
    power = np.where(big > 1e150, np.exp2(np.floor(np.log2(np.where(big > 0, big, 1.0)))), 1.0)
    Xs = X / power
    mean = Xs.mean(axis=0) if centre else np.zeros(X.shape[1])
    sd = np.sqrt(np.mean((Xs - mean) ** 2, axis=0))
    scale = np.where(sd > 1e-12 * (1.0 + np.abs(mean)), sd, 1.0)
    Z = (Xs - mean) / scale
    return mean * power, scale * power, Z


class _ProgressMeter:
    """Average the per-task fractions into one 0..1 figure and pass it to the user's callback."""

    def __init__(self, callback: Callable[[float], Any], n_tasks: int) -> None:
        self._callback, self._done, self._lock = callback, [0.0] * n_tasks, threading.Lock()

    def part(self, i: int) -> Callable[[float], None]:
        def report(fraction: float) -> None:
            with self._lock:
                self._done[i] = float(fraction)
                total = sum(self._done) / len(self._done)
            self._callback(total)

        return report


class BayesianSVM(PartitionFitMixin, ClassifierMixin, BaseEstimator):
    """Bayesian linear SVM by data augmentation (Polson & Scott 2011), binary or one-vs-rest.

    The pseudo-posterior is exp(-2 Σ hinge) × Π exp(-|β_j/ν|^α) on standardised predictors (training
    means and population SDs; a constant column keeps SD 1), with a flat prior on the intercept. Its
    mode minimises Σ hinge + ν^{-α} Σ|β_j|^α / 2, so **α = 2 and ν = √C give the coefficients of
    ``SVC(kernel="linear", C)``** fitted on the standardised data (bayes-svm.md §1.2). Credible
    intervals are those of a pseudo-posterior: conventions, not calibrated probabilities.

    Parameters
    ----------
    method : {"em", "ecme", "mcmc", "spike_slab"}, default="em"
        EM mode with ν fixed; ECME mode with ν learned; Gibbs sampling; spike-and-slab Gibbs.
    alpha : float in (0, 2], default=1.0
        Exponent of the exponential-power prior (1 lasso, 2 ridge / standard SVM).
    nu : float in [1e-100, 1e100], default=1.0
        Prior scale (larger = less shrinkage); ECME and ``learn_nu`` start from it. For
        ``spike_slab`` with α = 2 it is the SD of the paper's Gaussian slab N(0, ν²) (§7), α = 1
        the Laplace slab exp(−|β/ν|); spike-and-slab supports α ∈ {1, 2} with ν fixed.
    learn_nu : bool, default=False
        MCMC: sample ν under a Gamma(a_nu, b_nu) prior on ν^{-α}. ECME always learns ν.
    a_nu, b_nu : float in [1e-100, 1e100], default=1.0
        Shape and rate of the Gamma prior on τ = ν^{-α}.
    n_draws, burn_in, n_chains, thin : int
        MCMC: kept draws per chain, sweeps discarded first, chains, sweeps per kept draw.
    prior_inclusion : float in (0, 1], default=0.5
        Spike-and-slab prior inclusion probability of each predictor (the intercept is always in).
    tol : float, default=1e-8
        EM/ECME: stop when the relative change of the objective is at most ``tol``.
    max_iter : int, default=10000
        EM/ECME iteration cap.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept. Without it predictors are scaled but not centred.
    multiclass : {"ovr", "ovo"}, default="ovr"
        More than two classes: one-vs-rest (one binary model per class on every row) or
        one-vs-one (one per pair of classes on the pair's rows, votes as in ``KernelSVM``). Every
        problem is fitted on X standardised over all rows, so each prior acts on the same scale.
    random_state : int, RandomState or None
        Seeds the MCMC chains (independent children of one ``np.random.SeedSequence``).
    n_jobs : int or None
        joblib workers for the one-vs-rest problems and their chains, and threads of
        ``predict_interval`` (None there: one per core, at most 4). ``method="mcmc"`` advances the
        chains of one problem together in batched numpy calls; with more workers than problems
        each problem's chains are split into up to ``n_jobs // n_problems`` batches, one per job.
        ``spike_slab`` runs one job per chain.
    warm_start : bool, default=False
        EM: start from the previous ``fit``'s mode (``beta_std_``, when its shape matches) instead
        of the ridge starting point, as scikit-learn's ``warm_start``; for paths over ν. Exact zeros
        are nudged to 1e-6 (absorbing for α < 2). Other methods ignore it.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    binary_problems_ : list of (int, int)
        (positive, negative) class indices of each binary problem (``multiclass.binary_problems``;
        negative ``REST`` in one-vs-rest): the row order of ``coef_`` and of every per-problem
        attribute.
    coef_ : ndarray of shape (1, n_features) or (n_problems, n_features)
        Original scale: the mode (EM/ECME) or the Rao-Blackwellised posterior mean (MCMC).
    intercept_ : ndarray of shape (1,) or (n_problems,)
    coef_std_ : ndarray, shape as ``coef_``
        The same coefficients on the standardised scale.
    nu_ : float or ndarray of shape (n_problems,)
        ν used, learned (ECME) or its posterior mean (MCMC with ``learn_nu``).
    objective_ : float or ndarray
        EM/ECME: d_α(β, 2^{1/α} ν_) at the mode (standardised scale).
    n_iter_ : int
        EM/ECME iterations (largest over problems) or MCMC sweeps per chain.
    converged_ : bool
        EM/ECME: tolerance reached. MCMC: every coefficient (original scale) has a rank-normalised
        split R-hat ≤ 1.01 and a bulk ESS ≥ 100; otherwise ``fit`` warns with
        ``MCMCConvergenceWarning`` naming the coefficients that fail.
    rhat_, ess_ : ndarray of shape (n_problems, 1 + n_features)
        MCMC: R-hat and bulk ESS of the intercept and each coefficient (original scale); NaN
        where undefined (draws that never move).
    coef_draws_ : ndarray
        MCMC, original scale: (n_chains, n_draws, n_features) for two classes, else
        (n_chains, n_draws, n_problems, n_features). ``intercept_draws_`` drops the last axis.
    inclusion_prob_ : ndarray, shape as ``coef_``
        Spike-and-slab: Rao-Blackwellised posterior inclusion probabilities.
    mean_, scale_ : ndarray of shape (n_features,)
        The standardisation used in ``fit``.
    n_passes_ : int
        ``fit_partitions`` only: passes made over the partitions (moments, start, iterations or
        sweeps, finish), shared by every class and chain.

    Notes
    -----
    Progress and cancellation: ``set_progress_callback(fn)`` registers ``fn(fraction)``, called
    during ``fit`` with the fraction of work done (sweeps for MCMC, iterations/max_iter for EM); an
    exception raised by ``fn`` aborts ``fit``. The callback is not a parameter: ``clone`` and
    pickling drop it. With a callback and ``n_jobs > 1`` the chains run in threads.
    """

    def __init__(
        self,
        method: str = "em",
        alpha: float = 1.0,
        nu: float = 1.0,
        learn_nu: bool = False,
        a_nu: float = 1.0,
        b_nu: float = 1.0,
        n_draws: int = 2000,
        burn_in: int = 500,
        n_chains: int = 4,
        thin: int = 1,
        prior_inclusion: float = 0.5,
        tol: float = 1e-8,
        max_iter: int = 10000,
        fit_intercept: bool = True,
        multiclass: str = "ovr",
        random_state: int | np.random.RandomState | None = None,
        n_jobs: int | None = None,
        warm_start: bool = False,
    ) -> None:
        self.method = method
        self.alpha = alpha
        self.nu = nu
        self.learn_nu = learn_nu
        self.a_nu = a_nu
        self.b_nu = b_nu
        self.n_draws = n_draws
        self.burn_in = burn_in
        self.n_chains = n_chains
        self.thin = thin
        self.prior_inclusion = prior_inclusion
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.multiclass = multiclass
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.warm_start = warm_start

    # -- progress hook (not a parameter: clone- and pickle-safe) ------------------------------------
    def set_progress_callback(self, fn: Callable[[float], Any] | None) -> BayesianSVM:
        """Register ``fn(fraction_done)`` for the next ``fit``; raise inside it to cancel."""
        self._progress_callback = fn
        return self

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())  # object's is the live __dict__ itself
        state.pop("_progress_callback", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        if "classes_" in state and "binary_problems_" not in state:  # stored before one-vs-one
            self.binary_problems_ = binary_problems(self.classes_.size, "ovr")

    # -- fitting -------------------------------------------------------------------------------------
    def _check_params(self) -> None:
        check_params(self)

    def fit(self, X: Any, y: Any) -> BayesianSVM:
        """Standardise X, then fit one binary model (two classes), one per class (one-vs-rest) or
        one per pair of classes on the pair's rows (one-vs-one)."""
        self._check_params()
        X, y = check_fit_data(self, X, y)
        self.classes_, y_idx = encode_labels(y)
        self.mean_, self.scale_, Z = standardise(X, bool(self.fit_intercept))
        if self.fit_intercept:
            Z = np.column_stack([np.ones(Z.shape[0]), Z])
        penalised = np.ones(Z.shape[1], dtype=bool)
        penalised[0] = not self.fit_intercept
        self.binary_problems_ = binary_problems(len(self.classes_), str(self.multiclass))
        tasks = []
        for problem in self.binary_problems_:
            rows, targets = problem_targets(y_idx, problem)
            tasks.append(targets[:, None] * (Z if rows.all() else Z[rows]))
        if self.method in ("em", "ecme"):
            self._fit_modes(tasks, penalised)
        else:
            self._fit_mcmc(tasks, penalised)
        return self

    def _fit_modes(self, tasks: list[np.ndarray], penalised: np.ndarray) -> None:
        from .solvers.bayes_ecme import fit_ecme
        from .solvers.bayes_em import fit_em

        meter = self._meter(len(tasks))
        opts = {"alpha": float(self.alpha), "penalised": penalised, "tol": self.tol}
        results = []
        previous = getattr(self, "beta_std_", None) if self.warm_start else None
        if previous is not None and previous.shape != (len(tasks), tasks[0].shape[1]):
            previous = None
        for i, Xt in enumerate(tasks):
            report = meter.part(i) if meter else None
            if self.method == "em":
                beta0 = None if previous is None else warm_point(previous[i])
                res = fit_em(
                    Xt, nu=self.nu, max_iter=self.max_iter, beta0=beta0, progress=report, **opts
                )
            else:
                res = fit_ecme(
                    Xt, nu0=self.nu, a_nu=self.a_nu, b_nu=self.b_nu, max_iter=self.max_iter,
                    progress=report, **opts,
                )  # fmt: skip
            if report:
                report(1.0)
            results.append(res)
        self._store_modes(results)

    def _store_modes(self, results: list[Any]) -> None:
        self._store(np.array([r.beta for r in results]), [r.nu for r in results])
        self.objective_ = self._per_problem([r.objective for r in results])
        self.n_iter_ = max(r.n_iter for r in results)
        self.converged_ = all(r.converged for r in results)

    def _fit_mcmc(self, tasks: list[np.ndarray], penalised: np.ndarray) -> None:
        from .solvers.bayes_gibbs import run_gibbs_chains
        from .solvers.bayes_spike_slab import run_spike_slab

        rs = self.random_state
        entropy = None if rs is None else int(check_random_state(rs).randint(0, 2**31 - 1))
        seeds = np.random.SeedSequence(entropy).spawn(len(tasks) * self.n_chains)
        common = {
            "alpha": float(self.alpha), "nu": float(self.nu), "n_draws": self.n_draws,
            "burn_in": self.burn_in, "thin": self.thin, "penalised": penalised,
        }  # fmt: skip
        if self.method == "mcmc":
            # chains of one problem run batched; the n_jobs workers split them into groups
            per_task = max(1, min(self.n_chains, effective_n_jobs(self.n_jobs) // len(tasks)))
            groups = [
                (t, [t * self.n_chains + c for c in chunk])
                for t in range(len(tasks))
                for chunk in np.array_split(np.arange(self.n_chains), per_task)
            ]
            extra = {"learn_nu": bool(self.learn_nu), "a_nu": self.a_nu, "b_nu": self.b_nu}
            meter = self._meter(len(groups))
            jobs = [
                delayed(run_gibbs_chains)(
                    tasks[t],
                    seeds=[seeds[i] for i in chain_ids],
                    progress=meter.part(j) if meter else None,
                    **common,
                    **extra,
                )
                for j, (t, chain_ids) in enumerate(groups)
            ]
            batches = Parallel(n_jobs=self.n_jobs, prefer="threads" if meter else None)(jobs)
            out = [
                {key: value[c] for key, value in batch.items()}
                for batch in batches
                for c in range(len(batch["nu_draws"]))
            ]  # per chain, in seed order: groups are contiguous and in order
        else:
            meter = self._meter(len(seeds))
            jobs = [
                delayed(run_spike_slab)(
                    tasks[i // self.n_chains],
                    seed=seed,
                    progress=meter.part(i) if meter else None,
                    prior_inclusion=float(self.prior_inclusion),
                    **common,
                )
                for i, seed in enumerate(seeds)
            ]
            out = Parallel(n_jobs=self.n_jobs, prefer="threads" if meter else None)(jobs)
        self._store_chains(out, len(tasks))

    def _store_chains(self, out: list[dict[str, np.ndarray]], n_tasks: int) -> None:
        """Draws, RB means and diagnostics from one dict per (problem, chain), in that order."""
        shape = (n_tasks, self.n_chains)
        draws = np.array([o["beta_draws"] for o in out]).reshape(*shape, self.n_draws, -1)
        rb = np.array([o["beta_rb"] for o in out]).reshape(*shape, -1).mean(axis=1)
        nus = np.array([o["nu_draws"] for o in out]).reshape(n_tasks, -1).mean(axis=1)
        self._store(rb, list(nus))
        self.beta_draws_std_ = draws
        coef, intercept = self._to_original(np.moveaxis(draws, 0, 2))
        binary = n_tasks == 1
        self.coef_draws_ = coef[:, :, 0] if binary else coef
        self.intercept_draws_ = intercept[:, :, 0] if binary else intercept
        if self.method == "spike_slab":
            incl = np.array([o["inclusion_prob"] for o in out]).reshape(*shape, -1).mean(axis=1)
            self.inclusion_prob_ = incl[:, int(self.fit_intercept) :]
        self.n_iter_ = self.burn_in + self.n_draws * self.thin
        self._check_convergence()

    def _check_convergence(self) -> None:
        """Set ``rhat_``, ``ess_`` and ``converged_``; warn naming the coefficients that fail."""
        self.rhat_, self.ess_ = chain_diagnostics(coefficient_draws(self, "original"))
        names = ["intercept", *feature_names(self)]
        if self.rhat_.shape[0] > 1:
            names = [f"{n} ({problem})" for problem in problem_names(self) for n in names]
        message = convergence_message(names, self.rhat_.ravel(), self.ess_.ravel())
        if self.n_draws < MIN_DRAWS:
            message = (
                f"MCMC convergence cannot be assessed with n_draws={self.n_draws} < {MIN_DRAWS} "
                "per chain (split R-hat needs 4 per half); increase n_draws."
            )
        self.converged_ = message is None
        if message is not None:
            warnings.warn(message, MCMCConvergenceWarning, stacklevel=5)

    def _meter(self, n_tasks: int) -> _ProgressMeter | None:
        callback = getattr(self, "_progress_callback", None)
        return _ProgressMeter(callback, n_tasks) if callback is not None else None

    def _to_original(self, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Standardised β (..., k) → (coef (..., d), intercept (...)) on the scale of X."""
        slopes = beta[..., int(self.fit_intercept) :]
        coef = slopes / self.scale_
        b0 = beta[..., 0] if self.fit_intercept else np.zeros(beta.shape[:-1])
        return coef, b0 - coef @ self.mean_

    def _store(self, beta_std: np.ndarray, nus: list[float]) -> None:
        self.beta_std_ = beta_std
        self.coef_std_ = beta_std[:, int(self.fit_intercept) :]
        self.coef_, self.intercept_ = self._to_original(beta_std)
        self.nu_ = self._per_problem(nus)

    def _per_problem(self, values: list[float]) -> float | np.ndarray:
        return float(values[0]) if len(values) == 1 else np.asarray(values, dtype=np.float64)

    # -- prediction ----------------------------------------------------------------------------------
    def _problem_decisions(self, X: Any) -> np.ndarray:
        """x'β + b of every binary problem: (n, n_problems)."""
        check_fitted(self, "coef_")
        X = check_predict_data(self, X)
        return X @ self.coef_.T + self.intercept_

    def decision_function(self, X: Any) -> np.ndarray:
        """x'β + b: shape (n,) for two classes (> 0 means classes_[1]), else (n, n_classes): one
        per class in one-vs-rest; in one-vs-one each class's votes plus its summed confidence
        squashed into (−1/3, 1/3) (``multiclass.ovo_votes``, as ``KernelSVM``)."""
        f = self._problem_decisions(X)
        if f.shape[1] == 1:
            return f.ravel()
        problems = self.binary_problems_
        return f if problems[0][1] == REST else ovo_votes(f, problems, self.classes_.size)

    def row_plan(
        self, mean: np.ndarray | None = None, scale: np.ndarray | None = None
    ) -> RowPlan | None:
        """The plan of D = z βᵀ + b, z = (x − ``mean``) / ``scale`` (``linear_rows``; the point
        decision, not its draws); None unfitted."""
        if not hasattr(self, "coef_"):
            return None
        n_classes, problems = self.classes_.size, self.binary_problems_
        rows = linear_rows(np.atleast_2d(self.coef_).T, self.intercept_, mean, scale)
        return RowPlan(rows, problems, n_classes, svm_output(n_classes, problems))

    def predict(self, X: Any) -> np.ndarray:
        """Class labels: sign of the decision (two classes), its arg-max (one-vs-rest) or the
        most votes (one-vs-one, ties to the larger summed confidence)."""
        f = self._problem_decisions(X)
        return self.classes_[label_index(f, self.binary_problems_, self.classes_.size)]

    def predict_interval(
        self, X: Any, level: float = 0.95, max_bytes: int | float = DEFAULT_MAX_BYTES
    ) -> tuple[np.ndarray, np.ndarray]:
        """Equal-tailed credible interval of x'β + b from the MCMC draws: (n,) for two classes,
        else (n, n_problems), one per binary problem (``binary_problems_``: per class in
        one-vs-rest, per pair in one-vs-one).

        The bounds are ``np.quantile`` (linear rule) of x'β_g + b_g over every chain's draws g,
        computed a block of rows at a time: a block's working memory stays within ``max_bytes``
        (at least one row), and ``n_jobs`` threads share the blocks (``n_jobs=None``: one thread
        per core, at most 4, since numpy releases the GIL in the heavy steps).
        """
        check_fitted(self, "coef_")
        self._require_draws()
        X = check_predict_data(self, X)
        if not (is_number(max_bytes) and max_bytes > 0):
            raise BsvmValueError(f"max_bytes must be a positive number, got {max_bytes!r}.")
        threads = default_threads() if self.n_jobs is None else effective_n_jobs(self.n_jobs)
        return decision_draws(X, self.coef_draws_, self.intercept_draws_, level, max_bytes, threads)

    def coefficient_means(self, scale: str = "original") -> np.ndarray:
        """(problems, 1 + d) point estimates with the intercept first, on ``scale``."""
        check_fitted(self, "coef_")
        return coefficient_means(self, scale)

    def coefficient_draws(self, scale: str = "original") -> np.ndarray:
        """(problems, chains, draws, 1 + d) posterior draws with the intercept first (MCMC only)."""
        check_fitted(self, "coef_")
        self._require_draws()
        return coefficient_draws(self, scale)

    def _require_draws(self) -> None:
        if not hasattr(self, "coef_draws_"):
            raise BsvmValueError(
                f"method={self.method!r} gives a mode, not posterior draws; use 'mcmc' or 'spike_slab'."
            )

    def posterior_summary(self, level: float = 0.95, scale: str = "original") -> list[dict]:
        """Per coefficient (and "intercept"): mean, sd, lower, upper, ess, rhat (+ inclusion_prob).

        ``scale`` is "original" (units of X) or "standardised". EM/ECME report the mode as ``mean``
        and None for the rest (the hinge has no curvature for a Laplace approximation). Multiclass
        rows carry a ``class`` key.
        """
        check_fitted(self, "coef_")
        return summarise(self, level, scale)
