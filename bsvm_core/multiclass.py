"""Multiclass decompositions: the binary problems of one-vs-one and one-vs-rest, and their votes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

REST = -1
"""Negative-class index that stands for "every other class" in a one-vs-rest problem."""


def binary_problems(n_classes: int, scheme: str) -> list[tuple[int, int]]:
    """List the (positive, negative) class-index pairs a scheme trains; one pair for two classes."""
    if n_classes == 2:
        return [(1, 0)]
    if scheme == "ovr":
        return [(k, REST) for k in range(n_classes)]
    if scheme == "ovo":
        return [(j, i) for i in range(n_classes) for j in range(i + 1, n_classes)]
    raise ValueError(f"multiclass must be 'ovo' or 'ovr', got {scheme!r}.")


def problem_classes(
    classes: Sequence[Any], problems: list[tuple[int, int]]
) -> list[tuple[Any, Any]]:
    """(class, versus) labels of each problem: versus None in one-vs-rest and for two classes
    (whose one problem is ``classes[1]`` against the other)."""
    if len(classes) == 2:
        return [(classes[1], None)]
    return [(classes[pos], None if neg == REST else classes[neg]) for pos, neg in problems]


_SIGNS = np.array([-1.0, 1.0])
"""The target of a row outside and inside the positive class, indexed by membership."""


def problem_targets(
    y_idx: np.ndarray, problem: tuple[int, int], members: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Return (row mask, ±1 targets) of one binary problem over encoded labels. ``members``
    (classes, rows), ``members[c] = y_idx == c``, when made once for all problems (the targets
    then cost two thirds less: ~3 against ~8 µs on wine's pairs; with two classes every row is
    in the problem)."""
    pos, neg = problem
    in_pos = y_idx == pos if members is None else members[pos]
    if neg == REST or (members is not None and members.shape[0] == 2):
        mask, inside = np.ones(y_idx.shape[0], dtype=bool), in_pos
    else:
        mask = in_pos | (y_idx == neg if members is None else members[neg])
        inside = in_pos[mask]
    return mask, _SIGNS.take(inside.view(np.uint8))


def two_class_targets(y_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``problem_targets`` of two classes' one problem (1, 0): every row, and ±1 = 2 y − 1 of
    the encoded labels y ∈ {0, 1} (one ``take``: no class masks, ~1 against ~6 µs on moons)."""
    return np.ones(y_idx.shape[0], dtype=bool), _SIGNS.take(y_idx)


def ovo_votes(decisions: np.ndarray, problems: list[tuple[int, int]], n_classes: int) -> np.ndarray:
    """Votes plus a tie-breaker: each class's summed confidence squashed into (-1/3, 1/3).

    A class's score is its number of pairwise wins plus ``s / (3 (|s| + 1))`` where ``s`` is the sum of
    its signed pairwise decision values, so the vote count always dominates and ties go to the class
    with the larger summed confidence (the rule libsvm's users know from scikit-learn's SVC).
    """
    n = decisions.shape[0]
    votes = np.zeros((n, n_classes))
    confidence = np.zeros((n, n_classes))
    for col, (pos, neg) in enumerate(problems):
        f = decisions[:, col]
        win = f > 0
        votes[:, pos] += win
        votes[:, neg] += ~win
        confidence[:, pos] += f
        confidence[:, neg] -= f
    return votes + confidence / (3.0 * (np.abs(confidence) + 1.0))


ROUNDING = 4.0 * 2.0**-53
"""Slack relative to the decision values themselves: their own float64 rounding (with margin)."""


def label_index(D: np.ndarray, problems: list[tuple[int, int]], n_classes: int) -> np.ndarray:
    """Class index of every row of the decision matrix D (n, problems), as ``predict`` gives it."""
    if n_classes == 2:
        return (D[:, 0] > 0).astype(np.intp)
    if problems[0][1] == REST:
        return np.argmax(D, axis=1)
    return np.argmax(ovo_votes(D, problems, n_classes), axis=1)


def certain_labels(
    D: np.ndarray, error: np.ndarray, problems: list[tuple[int, int]], n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """(labels, certain): ``label_index(D)``, and which rows keep that label for every D' with
    |D' − D| ≤ ``error`` (per column (p,), or per entry (n, p)) and D' rounded to float64.

    Two classes: |d| beyond the error. One-vs-rest: the largest value ahead of the next by more
    than both errors. One-vs-one: every pairwise sign sure and one class with the most votes (a
    tie in votes goes to the summed confidences, which are left to the exact values). The
    rule written out plainly: the reference ``sure_labels`` (which the estimators and the plans
    call) is tested against.
    """
    labels = label_index(D, problems, n_classes)
    E = error if error.ndim == 2 else error[None, :]
    slack = E + ROUNDING * np.abs(D)
    if n_classes == 2:
        return labels, np.abs(D[:, 0]) > slack[:, 0]
    if problems[0][1] == REST:
        top2 = -np.partition(-D, 1, axis=1)[:, :2]
        gap = top2[:, 0] - top2[:, 1]
        return labels, gap > 2.0 * E.max(axis=1) + ROUNDING * np.abs(top2).sum(axis=1)
    signs_sure = np.all(np.abs(D) > slack, axis=1)
    votes = np.zeros((D.shape[0], n_classes))
    for col, (pos, neg) in enumerate(problems):
        win = D[:, col] > 0
        votes[:, pos] += win
        votes[:, neg] += ~win
    unique_top = np.count_nonzero(votes == votes.max(axis=1, keepdims=True), axis=1) == 1
    return labels, signs_sure & unique_top


def vote_matrix(problems: list[tuple[int, int]], n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(Δ, c): one-vs-one votes = [D > 0] Δ + c, Δ = P − N and c = 1ᵀN with P, N (problems,
    classes) the indicators of each problem's positive and negative class."""
    P = np.zeros((len(problems), n_classes))
    N = np.zeros((len(problems), n_classes))
    for col, (pos, neg) in enumerate(problems):
        P[col, pos] = 1.0
        N[col, neg] = 1.0
    return P - N, N.sum(axis=0)


def sure_labels(
    D: np.ndarray,
    error: np.ndarray,
    problems: list[tuple[int, int]],
    n_classes: int,
    votes: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``certain_labels``' (labels, certain) in fewer calls, the labels ``label_index(D)``'s on the
    certain rows only (the others are to be scored again): one-vs-one's votes as one product
    (``vote_matrix``, or ``votes`` made once), whose top, when unique, no confidence term (of
    magnitude < 1/3) can overturn; one-vs-rest's top two from a sort. ``error`` may also be one
    bound per row (n, 1)."""
    E = error if error.ndim == 2 else error[None, :]
    if n_classes == 2:  # |f| > e + ROUNDING |f|, i.e. |f| > e / (1 − ROUNDING)
        f = D[:, 0]
        return (f > 0).view(np.int8), np.abs(f) > E[:, 0] * (1.0 / (1.0 - ROUNDING))
    n = D.shape[0]
    if problems[0][1] == REST:
        ordered = np.sort(D, axis=1)  # NaN last: never sure
        top, second = ordered[:, -1], ordered[:, -2]
        widest = E[:, 0] if E.shape[1] == 1 else np.maximum.reduce(E, axis=1)
        bound = 2.0 * widest + ROUNDING * (np.abs(top) + np.abs(second))
        return np.argmax(D, axis=1), top - second > bound
    delta, base = vote_matrix(problems, n_classes) if votes is None else votes
    A = np.abs(D)
    signs_sure = np.logical_and.reduce(A > E + ROUNDING * A, axis=1)
    V = np.dot(D > 0, delta)
    V += base
    labels = np.argmax(V, axis=1)
    unique_top = np.count_nonzero(V[np.arange(n), labels][:, None] == V, axis=1) == 1
    return labels, signs_sure & unique_top


def sure_label(
    f: list[float], error: list[float], problems: list[tuple[int, int]], n_classes: int
) -> int | None:
    """``sure_labels`` of one row's decision values ``f`` and their ``error`` as Python floats
    (cheaper than arrays for one row): its label when certain, else None."""
    if not all(map(math.isfinite, f)):
        return None
    if n_classes == 2:
        return int(f[0] > 0.0) if abs(f[0]) > error[0] + ROUNDING * abs(f[0]) else None
    if problems[0][1] == REST:
        k = max(range(len(f)), key=f.__getitem__)  # the first of the largest, as argmax
        top = f[k]
        second = max(v for i, v in enumerate(f) if i != k)
        sure = top - second > 2.0 * max(error) + ROUNDING * (abs(top) + abs(second))
        return k if sure else None
    votes = [0] * n_classes
    for v, e, (pos, neg) in zip(f, error, problems, strict=True):
        if not abs(v) > e + ROUNDING * abs(v):
            return None
        votes[pos if v > 0.0 else neg] += 1
    k = max(range(n_classes), key=votes.__getitem__)
    return k if votes.count(votes[k]) == 1 else None
