"""A stored model readied for scoring, once per loaded estimator.

Every predict of a model used to work out the same facts again: its answer's head (id, name,
version, classes), which outputs it gives (``hasattr`` on a pipeline's ``available_if``
methods), its working bytes per row, and its scoring callables (``inference.scoring``; labels
and decision values of a few rows from the model's plan, scaling folded in, for the linear,
kernel, Bayesian point and LDA models: ``inference.planned``). A
``Servable`` holds them; ``servable`` makes it on the first predict of a loaded estimator and
the model cache keeps it with the estimator (``ModelStore.prepared``), so it is dropped when
the estimator is evicted and can never describe another one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.inference.limits import row_bytes
from service.inference.planned import planned_scorers
from service.inference.scoring import Scorer, scorer
from service.inference.signature import outputs_of
from service.repository.store import ModelStore
from service.schemas.outputs import OUTPUTS, POINT_OUTPUTS

MAX_OUTPUT_SETS = 64
"""Sets of outputs a ``Servable`` keeps the scorers of (``points``); others are worked out anew."""


@dataclass(frozen=True, eq=False)
class Servable:
    """One model as its predicts need it."""

    model_id: str
    estimator: Any
    head: dict[str, Any]
    """The answer's first fields: model id, name, version, classes."""
    gives: frozenset[str]
    """Short names of the outputs it gives (``label``, ``decision``, ...)."""
    per_row: int
    """Working bytes of scoring one row (``limits.row_bytes``)."""
    scorers: dict[str, Scorer]
    """Short name of each point output it gives → its scoring callable."""
    _points: dict[frozenset[str], tuple[tuple[str, Scorer, bool], ...]] = field(
        default_factory=dict, init=False, repr=False
    )

    def points(self, outputs: frozenset[str]) -> tuple[tuple[str, Scorer, bool], ...]:
        """(response key, scorer, whether labels) of each point output among ``outputs`` (short
        names) it gives, in ``POINT_OUTPUTS`` order (worked out once per set of outputs)."""
        found = self._points.get(outputs)
        if found is None:
            found = tuple(
                (spec.key, self.scorers[spec.short], spec.labels)
                for spec in POINT_OUTPUTS
                if spec.short in outputs and spec.short in self.scorers
            )
            if len(self._points) < MAX_OUTPUT_SETS:
                self._points[outputs] = found
        return found


def make_servable(model_id: str, record: dict[str, Any], estimator: Any) -> Servable:
    """The ``Servable`` of a loaded estimator and its record."""
    gives = frozenset(outputs_of(estimator, OUTPUTS))
    return Servable(
        model_id=model_id,
        estimator=estimator,
        head={
            "model_id": model_id,
            "name": record["name"],
            "version": record["version"],
            "classes": record["classes"],
        },
        gives=gives,
        per_row=row_bytes(estimator, int(record["n_features"])),
        scorers=planned_scorers(
            estimator,
            {
                spec.short: scorer(estimator, spec.method)
                for spec in POINT_OUTPUTS
                if spec.short in gives and spec.method is not None
            },
        ),
    )


def servable(store: ModelStore, model_id: str) -> Servable:
    """The ``Servable`` of ``model_id`` (made once per loaded estimator)."""
    return store.prepared(model_id, make_servable)
