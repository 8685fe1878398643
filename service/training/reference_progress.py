"""The progress of a training by reference: a fraction for the job, and what it stands for.

The fit reads its partitions pass after pass (``service.data.partitions``); each partition done
calls ``partition(done, total)``, and the estimator's own hook (``set_progress_callback``) calls
``fit(fraction)``. The job sees a ``ProgressDetail`` (``service.schemas.jobs``):

* ``stage``: ``reading`` (the first pass: partitions read and counted; none on Dask when the
  metadata gives every row count: the fit's first pass reads them), ``scaling`` (the two
  passes of ``preprocess: standard``), ``fitting``, ``evaluating`` (metrics and plot data);
* ``pass``: passes begun so far, every stage counted; ``partitions_done`` of ``partitions`` in it;
* ``iterations``: passes the fitting stage completed; the solvers by partitions make one per
  iteration (an EM/ECME iteration, a Gibbs sweep of a chain and class, a Newton step's sums).

The fraction: 0.1 → 0.15 over the reading pass, 0.15 → 0.85 as the estimator's hook says (it
stays at 0.15 for an estimator without one), 0.85 while evaluating, 0.9 with the last detail at
the end (``finish``); the queue says 1.0 once the model is stored. Reports are sent at most every ``INTERVAL_S``,
but a change of stage and the last one (``flush``) always go.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

INTERVAL_S = 0.05
SPANS = {"reading": (0.1, 0.15), "scaling": (0.15, 0.15), "fitting": (0.15, 0.85)}
SPANS["evaluating"] = (0.85, 0.85)


class ReferenceProgress:
    """Counts passes and partitions, and reports ``(fraction, detail)`` to ``report``."""

    def __init__(self, report: Callable[..., None], interval_s: float = INTERVAL_S) -> None:
        self.report = report
        self.interval_s = interval_s
        self.stage = "reading"
        self.passes = 0
        self.done = 0
        self.total = 0
        self.fit_fraction = 0.0
        self.fit_from: int | None = None
        self.iterations: int | None = None
        self._last = float("-inf")

    def enter(self, stage: str) -> None:
        """Start ``stage`` (one of ``SPANS``) and report it."""
        if self.stage == "fitting":
            self.iterations = self._fit_passes()
        self.stage = stage
        if stage == "fitting":
            self.fit_from = self.passes
            self.iterations = 0
        self.flush()

    def partition(self, done: int, total: int) -> None:
        """One more partition of a pass is done (a new pass when ``done`` starts again)."""
        if done <= self.done or self.passes == 0:
            self.passes += 1
        self.done, self.total = done, total
        if self.stage == "fitting":
            self.iterations = self._fit_passes()
        self._send()

    def fit(self, fraction: float) -> None:
        """The estimator's hook: the share of its work done."""
        self.fit_fraction = min(max(float(fraction), self.fit_fraction), 1.0)
        self._send()

    def _fit_passes(self) -> int:
        """Passes of the fitting stage that are complete."""
        if self.fit_from is None:
            return 0
        begun = self.passes - self.fit_from
        return begun - (1 if 0 < self.done < self.total else 0)

    def fraction(self) -> float:
        """The job's fraction now (see the module notes)."""
        low, high = SPANS[self.stage]
        if self.stage == "reading":
            share = self.done / self.total if self.total else 0.0
        elif self.stage == "fitting":
            share = self.fit_fraction
        else:
            share = 0.0
        return low + (high - low) * share

    def detail(self) -> dict[str, Any]:
        """The ``ProgressDetail`` now, as a dict."""
        return {
            "stage": self.stage,
            "pass": self.passes,
            "partitions_done": self.done,
            "partitions": self.total,
            "iterations": self.iterations,
        }

    def finish(self) -> None:
        """The fit and its evaluation are over: 0.9 with the last detail (always relayed)."""
        self._last = time.monotonic()
        self.report(0.9, self.detail())

    def flush(self) -> None:
        """Report now, whenever the last report was."""
        self._last = time.monotonic()
        self.report(self.fraction(), self.detail())

    def _send(self) -> None:
        if time.monotonic() - self._last >= self.interval_s:
            self.flush()
