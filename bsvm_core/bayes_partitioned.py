"""``BayesianSVM.fit_partitions``: EM, ECME or Gibbs by sums over row partitions.

A mixin of ``BayesianSVM`` (``bayesian_svm``), whose ``_check_params``, ``_meter``,
``_store_modes`` and ``_store_chains`` it uses: the data never come together (the method's
docstring says how many passes each fit makes); the solvers are ``solvers/bayes_em_partitions``
and ``solvers/bayes_gibbs_partitions``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.utils.validation import check_random_state

from .exceptions import BsvmValueError
from .multiclass import REST, binary_problems
from .partition_moments import column_moments
from .partitions import RowPartitions
from .solvers.bayes_em import warm_point


class PartitionFitMixin:
    """The partitioned fits of ``BayesianSVM``."""

    def fit_partitions(self, parts: RowPartitions) -> Any:
        """Fit on row partitions (``bsvm_core.partitions``) by sums over rows: EM, ECME or MCMC.

        The data never come together: standardisation takes one pass (merged column moments),
        EM and ECME one pass per iteration (the Anderson candidate is evaluated in the same pass)
        plus two for the exact finish, which gathers only the rows near the hinge kink and
        certifies the mode on every row (ECME: two or three per round of its exact finish, which
        alternates that exact mode with ν's update until both are fixed); MCMC one pass per sweep for every chain and class. The
        learned attributes are those of ``fit`` on the same rows (EM/ECME: the same mode; MCMC:
        draws of the same posterior from other random streams, without ``fit``'s collapsed
        moves), plus ``n_passes_``, the passes made. ``spike_slab`` needs the rows in memory.
        """
        from .solvers.bayes_sums import Design, PassCounter

        self._check_params()
        if self.method == "spike_slab":
            raise BsvmValueError(
                "method='spike_slab' cannot be fitted by partitions: its single-site moves of "
                "the inclusion indicators need the rows in memory; load the rows (at most the "
                "in-memory row limit) and call fit."
            )
        moments = column_moments(parts)
        if moments.n == 0 or not moments.finite:
            raise BsvmValueError("the partitions hold no rows, or X contains NaN or infinity.")
        if moments.classes.size < 2:
            raise BsvmValueError(
                f"y contains {moments.classes.size} class; a classifier needs at least 2 classes."
            )
        self.classes_ = moments.classes
        self.binary_problems_ = binary_problems(self.classes_.size, str(self.multiclass))
        self.n_features_in_ = int(parts.n_features)
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        mean, scale = moments.standardisation(bool(self.fit_intercept))
        self.mean_, self.scale_ = mean * moments.power, scale * moments.power
        labels = tuple(self.classes_[pos] for pos, _ in self.binary_problems_)
        pairwise = self.classes_.size > 2 and self.binary_problems_[0][1] != REST
        versus = tuple(self.classes_[neg] for _, neg in self.binary_problems_) if pairwise else None
        design = Design(moments.power, mean, scale, bool(self.fit_intercept), labels, versus)
        penalised = np.ones(parts.n_features + int(self.fit_intercept), dtype=bool)
        penalised[0] = not self.fit_intercept
        counter = PassCounter()
        meter = self._meter(len(labels))
        progress = [meter.part(t) for t in range(len(labels))] if meter else None
        if self.method in ("em", "ecme"):
            self._fit_modes_partitions(parts, design, penalised, progress, counter)
        else:
            self._fit_mcmc_partitions(parts, design, penalised, progress, counter)
        self.n_passes_ = 1 + counter.passes
        return self

    def _fit_modes_partitions(
        self,
        parts: RowPartitions,
        design: Any,
        penalised: np.ndarray,
        progress: list[Callable[[float], None]] | None,
        counter: Any,
    ) -> None:
        from .solvers.bayes_em_partitions import fit_modes_by_partitions

        n_problems = len(design.labels)
        previous = getattr(self, "beta_std_", None) if self.warm_start else None
        if self.method != "em" or (
            previous is not None and previous.shape != (n_problems, penalised.size)
        ):
            previous = None
        results = fit_modes_by_partitions(
            parts, design, self.method, alpha=float(self.alpha), nu=float(self.nu),
            a_nu=float(self.a_nu), b_nu=float(self.b_nu), penalised=penalised, tol=self.tol,
            max_iter=self.max_iter, progress=progress, counter=counter,
            beta0=None if previous is None else [warm_point(b) for b in previous],
        )  # fmt: skip
        if progress:
            for report in progress:
                report(1.0)
        self._store_modes(results)

    def _fit_mcmc_partitions(
        self,
        parts: RowPartitions,
        design: Any,
        penalised: np.ndarray,
        progress: list[Callable[[float], None]] | None,
        counter: Any,
    ) -> None:
        from .solvers.bayes_gibbs_partitions import gibbs_by_partitions

        rs = self.random_state
        entropy = None if rs is None else int(check_random_state(rs).randint(0, 2**31 - 1))
        seed = int(np.random.SeedSequence(entropy).entropy)
        per_problem = gibbs_by_partitions(
            parts, design, seed=seed, n_chains=self.n_chains, progress=progress,
            counter=counter, alpha=float(self.alpha), nu=float(self.nu),
            learn_nu=bool(self.learn_nu), a_nu=float(self.a_nu), b_nu=float(self.b_nu),
            n_draws=self.n_draws, burn_in=self.burn_in, thin=self.thin, penalised=penalised,
        )  # fmt: skip
        out = [
            {key: value[c] for key, value in chains.items()}
            for chains in per_problem
            for c in range(self.n_chains)
        ]
        self._store_chains(out, len(per_problem))
