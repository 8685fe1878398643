"""The classification metrics of a training's record as numpy formulas on class indices.

The same numbers as scikit-learn's ``accuracy_score``, ``precision_recall_fscore_support``
(``zero_division=0``) and ``roc_auc_score``, without their validation (``type_of_target``,
``check_array``, parameter checks), which cost a small training more than its fit. Labels come as
indices into the model's ``classes_`` (``class_indices``); a label outside them is index −1.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def class_indices(classes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Index of every label in ``classes`` (−1 for a label that is not one of them)."""
    order = np.argsort(classes, kind="stable")
    found = np.searchsorted(classes, labels, sorter=order)
    found = order[np.minimum(found, classes.size - 1)]
    return np.where(classes[found] == labels, found, -1)


def accuracy(true: np.ndarray, pred: np.ndarray) -> float:
    """Share of rows whose predicted class is the true one."""
    return float(np.mean(true == pred)) if true.size else 0.0


def precision_recall_f1(
    true: np.ndarray, pred: np.ndarray, n_classes: int, positive: int | None
) -> tuple[float, float, float]:
    """Precision tp/(tp+fp), recall tp/(tp+fn), F1 2tp/(2tp+fp+fn), each 0 where its denominator is;
    of class ``positive``, or their macro means over the ``n_classes`` classes when None."""
    hits = true[(true == pred) & (true >= 0)]
    tp = np.bincount(hits, minlength=n_classes)[:n_classes].astype(float)
    predicted = np.bincount(pred[pred >= 0], minlength=n_classes)[:n_classes]
    actual = np.bincount(true[true >= 0], minlength=n_classes)[:n_classes]
    precision = _ratio(tp, predicted)
    recall = _ratio(tp, actual)
    f1 = _ratio(2 * tp, predicted + actual)
    if positive is not None:
        return float(precision[positive]), float(recall[positive]), float(f1[positive])
    return float(precision.mean()), float(recall.mean()), float(f1.mean())


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (``zero_division=0``)."""
    out = np.zeros(numerator.shape)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def roc_auc(positive: np.ndarray, scores: np.ndarray) -> float | None:
    """Area under the ROC curve: the Mann-Whitney U over n₊n₋ with mid-ranks, so a tie between a
    positive and a negative counts one half (the trapezoids of ``roc_auc_score``); None when one
    of the two groups is empty or a score is not finite."""
    n_pos = int(np.count_nonzero(positive))
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0 or not np.all(np.isfinite(scores)):
        return None
    ranks = rankdata(scores, method="average")
    u = ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def macro_ovr_auc(true: np.ndarray, proba: np.ndarray) -> float | None:
    """Mean over classes of the ROC AUC of class k against the rest by ``proba[:, k]`` (scikit-learn's
    ``multi_class="ovr", average="macro"``); None when a class is absent or the rows of ``proba``
    do not sum to 1 (scikit-learn refuses those)."""
    if not np.allclose(1.0, proba.sum(axis=1)):
        return None
    areas = [roc_auc(true == k, proba[:, k]) for k in range(proba.shape[1])]
    if any(area is None for area in areas):
        return None
    return float(np.mean(areas))
