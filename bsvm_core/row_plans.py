"""A fitted model's labels and decision values of raw rows, from a plan made once per model.

A plan holds the model's decision matrix D (n, p) — one column per binary problem (or per class)
— as a few numpy calls on raw rows, with a ``StandardScaler``'s z = (x − μ) / σ folded in
(``linear_rows``, ``kernel_rows``, ``rbf_rows``), and a bound E on |D − the estimator's D| per
entry: ``TIE_BOUND`` times the scale of the terms summed, far beyond both computations' rounding
(about (d + m) 2⁻⁵³ times that scale). The estimator's own rule turns D into labels
(``multiclass.label_index``); ``multiclass.sure_labels`` (``certain_labels`` in fewer calls) marks
the rows whose label some D' within E of D could change, which the caller scores again with the
estimator, so labels are always the estimator's. Decision values are the estimator's output of D (a binary problem's
column, one-vs-rest's D, one-vs-one's votes, LDA's log-posterior) and differ by rounding only;
one-vs-one's votes jump with a pairwise sign, so a row with a pairwise |D| within E is not sure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from .discriminant import log_posterior
from .multiclass import ROUNDING, ovo_votes, sure_label, sure_labels, vote_matrix

TIE_BOUND = 2.0**-30
"""Relative width of the band around a tie in which labels are left to the estimator (rounding
moves a decision value by about (d + m) 2⁻⁵³ times the same scale)."""

Output = Literal["margin", "matrix", "votes", "log_posterior"]
"""What the estimator's ``decision_function`` makes of D: column 0 (two classes), D itself
(one-vs-rest), ``multiclass.ovo_votes(D)`` or ``discriminant.log_posterior(D)``."""


class Rows(Protocol):
    """D and its error bound E of raw rows (``linear_rows``, ``kernel_rows``, ``rbf_rows``)."""

    @property
    def width(self) -> int:
        """Working entries per row (support vectors, or features)."""

    def scores(self, X: np.ndarray, screen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(D (n, p), E (p,), (n, p) or (n, 1)) of raw rows X (n, d); ``screen``: for labels
        only."""

    def row(self, x: np.ndarray) -> np.ndarray:
        """D (p,) of one raw row x (d,)."""

    def row_scores(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(D (p,), E (p,) or (1,)) of one raw row x (d,)."""

    def margin(self, x: np.ndarray, bound: bool = True) -> tuple[float, float]:
        """(D₀, E₀) of one raw row x (d,) as floats, in the fewest calls (two classes); E₀ may
        be 0 unless ``bound``."""


def signs_sure(D: np.ndarray, E: np.ndarray) -> np.ndarray:
    """Rows whose every |D| exceeds E + its own rounding: every pairwise sign sure (n,)."""
    return np.all(np.abs(D) > E + ROUNDING * np.abs(D), axis=1)


@dataclass(frozen=True, eq=False)
class RowPlan:
    """A model's ``Rows`` and the rule of its labels and decision values (module docstring)."""

    rows: Rows
    problems: list[tuple[int, int]]
    """(positive, negative) class indices of D's columns (``multiclass.binary_problems``)."""
    n_classes: int
    output: Output
    votes: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False)
    """``multiclass.vote_matrix`` of the problems."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "votes", vote_matrix(self.problems, self.n_classes))

    def labels(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(class index (n,), certain (n,)) of raw rows X (n, d): ``multiclass.sure_labels`` of
        D, E (indices of rows not certain are to be scored again)."""
        D, E = self.rows.scores(X, screen=True)
        return sure_labels(D, E, self.problems, self.n_classes, self.votes)

    def row_label(self, x: np.ndarray) -> int | None:
        """Class index of one raw row x (d,), or None when not certain: ``sure_label`` (two
        classes: its rule on ``margin``'s floats, in fewer calls)."""
        if self.n_classes == 2:
            f0, e0 = self.rows.margin(x)
            return (
                (1 if f0 > 0.0 else 0) if abs(f0) > e0 + ROUNDING * abs(f0) else None
            )  # NaN: None
        f, e = self.rows.row_scores(x)
        error = e.tolist()
        if len(error) < f.shape[0]:  # one bound for every column
            error *= f.shape[0]
        return sure_label(f.tolist(), error, self.problems, self.n_classes)

    def decisions(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(the estimator's decision values of raw rows X (n, d), sure (n,) or None: all sure)."""
        if self.output != "votes":
            D, _ = self.rows.scores(X)
            return self._output(D), None
        D, E = self.rows.scores(X)
        return ovo_votes(D, self.problems, self.n_classes), signs_sure(D, E)

    def row_decision(self, x: np.ndarray) -> np.ndarray | None:
        """Decision values of one raw row x (d,) as the estimator shapes them for one row
        ((1,) or (1, classes)), or None when not sure."""
        if self.output == "margin":
            return np.array([self.rows.margin(x, False)[0]])
        if self.output != "votes":
            return self._output(self.rows.row(x)[None, :])
        f, e = self.rows.row_scores(x)
        return self._output(f[None, :]) if signs_sure(f[None, :], e[None, :])[0] else None

    def _output(self, D: np.ndarray) -> np.ndarray:
        """``decision_function``'s values from D (n, p)."""
        if self.output == "margin":
            return D[:, 0]
        if self.output == "votes":
            return ovo_votes(D, self.problems, self.n_classes)
        if self.output == "log_posterior":
            return log_posterior(D)
        return D


def svm_output(n_classes: int, problems: list[tuple[int, int]]) -> Output:
    """The ``Output`` of an SVM's D: margin (two classes), matrix (one-vs-rest) or votes."""
    if n_classes == 2:
        return "margin"
    return "matrix" if problems[0][1] < 0 else "votes"
