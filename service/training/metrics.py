"""Metrics of a fitted classifier, on its training data and on a stratified held-out split.

Binary problems score the positive class ``classes[1]`` (precision, recall, F1) and rank by the
decision value (ROC AUC). With three or more classes precision, recall and F1 are macro averages
(every class counts the same) and ROC AUC is the macro one-vs-rest AUC of ``predict_proba``, so it
is reported only when the model has probabilities; otherwise it is ``null``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score, precision_recall_fscore_support, roc_auc_score
from sklearn.model_selection import train_test_split


def heldout_split(
    X: np.ndarray, y: np.ndarray, test_fraction: float, random_state: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stratified (X_train, X_test, y_train, y_test); ValueError when a class is too small."""
    return train_test_split(X, y, test_size=test_fraction, random_state=random_state, stratify=y)


def _scores(estimator: Any, X: np.ndarray, n_classes: int) -> np.ndarray | None:
    """Scores for ROC AUC: decision values (binary) or probabilities (multiclass), else None."""
    if n_classes == 2 and hasattr(estimator, "decision_function"):
        return np.asarray(estimator.decision_function(X))
    if not hasattr(estimator, "predict_proba"):  # e.g. an SVM trained without probability=True
        return None
    proba = np.asarray(estimator.predict_proba(X))
    return proba[:, 1] if n_classes == 2 else proba


def classification_metrics(estimator: Any, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Accuracy, precision, recall, F1 (binary: of classes_[1]; else macro) and ROC AUC or None."""
    classes = estimator.classes_
    y_pred = estimator.predict(X)
    binary = classes.size == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        precision, recall, f1, _ = precision_recall_fscore_support(
            y,
            y_pred,
            labels=classes,
            average="binary" if binary else "macro",
            pos_label=classes[1] if binary else 1,
            zero_division=0,
        )
    auc: float | None = None
    scores = _scores(estimator, X, classes.size)
    if scores is not None and np.unique(y).size == classes.size:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if binary:
                    auc = float(roc_auc_score(y == classes[1], scores))
                else:
                    auc = float(
                        roc_auc_score(y, scores, labels=classes, multi_class="ovr", average="macro")
                    )
            except ValueError:
                auc = None
    return {
        "n_samples": int(y.shape[0]),
        "accuracy": float(accuracy_score(y, y_pred)),
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1),
        "roc_auc": auc if auc is None or np.isfinite(auc) else None,
        "average": "binary" if binary else "macro",
    }
