"""Metrics of a fitted classifier, on its training data and on a stratified held-out split.

Binary problems score the positive class ``classes[1]`` (precision, recall, F1) and rank by the
decision value (ROC AUC). With three or more classes precision, recall and F1 are macro averages
(every class counts the same) and ROC AUC is the macro one-vs-rest AUC of ``predict_proba``, so it
is reported only when the model has probabilities; otherwise it is ``null``. The formulas are
numpy's (``metric_formulas``), on one pass of the model over the rows (``predictions``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split

from service.training.metric_formulas import (
    accuracy,
    class_indices,
    macro_ovr_auc,
    precision_recall_f1,
    roc_auc,
)


def heldout_split(
    X: np.ndarray, y: np.ndarray, test_fraction: float, random_state: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stratified (X_train, X_test, y_train, y_test); ValueError when a class is too small."""
    return train_test_split(X, y, test_size=test_fraction, random_state=random_state, stratify=y)


def predictions(estimator: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Predicted class indices and the scores ROC AUC ranks by, from one pass over ``X``.

    Two classes: one ``decision_function``, whose sign is the label (every model type's
    ``predict`` is ``classes_[decision > 0]`` for two classes; tested per type), and whose values
    are the scores. More classes: ``predict``, and ``predict_proba`` only when the model has it
    (otherwise no ROC AUC). An estimator without ``decision_function``: ``predict`` and the
    probability of ``classes_[1]``.
    """
    classes = estimator.classes_
    if classes.size == 2 and hasattr(estimator, "decision_function"):
        scores = np.asarray(estimator.decision_function(X), dtype=float)
        return (scores > 0).astype(np.intp), scores
    pred = class_indices(classes, np.asarray(estimator.predict(X)))
    if not hasattr(estimator, "predict_proba"):  # e.g. an SVM trained without probability=True
        return pred, None
    proba = np.asarray(estimator.predict_proba(X), dtype=float)
    return pred, proba[:, 1] if classes.size == 2 else proba


def classification_metrics(estimator: Any, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Accuracy, precision, recall, F1 (binary: of classes_[1]; else macro) and ROC AUC or None."""
    classes = estimator.classes_
    binary = classes.size == 2
    pred, scores = predictions(estimator, X)
    true = class_indices(classes, np.asarray(y))
    precision, recall, f1 = precision_recall_f1(
        true, pred, classes.size, positive=1 if binary else None
    )
    auc: float | None = None
    if scores is not None and np.unique(true[true >= 0]).size == classes.size:
        auc = roc_auc(true == 1, scores) if binary else macro_ovr_auc(true, scores)
    return {
        "n_samples": int(y.shape[0]),
        "accuracy": accuracy(true, pred),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "roc_auc": auc,
        "average": "binary" if binary else "macro",
    }
