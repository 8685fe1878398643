"""Multiclass decompositions: the binary problems of one-vs-one and one-vs-rest, and their votes."""

from __future__ import annotations

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


def problem_targets(y_idx: np.ndarray, problem: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Return (row mask, ±1 targets) of one binary problem over encoded labels."""
    pos, neg = problem
    mask = np.ones(y_idx.shape[0], dtype=bool) if neg == REST else (y_idx == pos) | (y_idx == neg)
    y_pm = np.where(y_idx[mask] == pos, 1.0, -1.0)
    return mask, y_pm


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
