"""LDA and QDA against scikit-learn's discriminant analysis, fit and predict_proba times."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.datasets import load_digits, make_classification
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis

from bsvm_core.exceptions import SingularCovarianceWarning
from bsvm_core.lda import LDA
from bsvm_core.qda import QDA

from .common import row, time_median

PAIRS: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "LDA": (LDA, lambda: LinearDiscriminantAnalysis(solver="svd")),
    "QDA": (QDA, QuadraticDiscriminantAnalysis),
}


def _datasets(quick: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Digits (10 classes, constant pixels) and a full-rank 20-feature synthetic problem."""
    X_d, y_d = load_digits(return_X_y=True)
    n = 5000 if quick else 20000
    X_m, y_m = make_classification(
        n_samples=n, n_features=20, n_informative=10, n_redundant=0, random_state=0
    )
    return [("digits", X_d, y_d), (f"make_classification({n}, 20, n_redundant=0)", X_m, y_m)]


def _time_model(make: Callable[[], Any], X: np.ndarray, y: np.ndarray, repeat: int) -> tuple:
    """Median (fit seconds, predict_proba seconds, predictions), or Nones and the error."""
    try:
        fit_s, model = time_median(lambda: make().fit(X, y), repeat)
    except np.linalg.LinAlgError as exc:
        return None, None, None, type(exc).__name__
    predict_s, _ = time_median(lambda: model.predict_proba(X), repeat)
    return fit_s, predict_s, model.predict(X), ""


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Benchmark rows (bench.common format) for LDA and QDA on every dataset."""
    repeat = 3 if quick else 7
    rows = []
    for dataset, X, y in _datasets(quick):
        for task, (ours_cls, sk_cls) in PAIRS.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SingularCovarianceWarning)
                ours_fit, ours_pred, ours_labels, _ = _time_model(ours_cls, X, y, repeat)
            sk_fit, sk_pred, sk_labels, sk_error = _time_model(sk_cls, X, y, repeat)
            if sk_error:
                note = f"sklearn raises {sk_error}; ours regularises (reg_applied_)"
            else:
                agree = float(np.mean(ours_labels == sk_labels))
                note = f"predictions agree {100 * agree:.2f}%"
            rows.append(
                row(
                    task,
                    dataset,
                    X.shape[0],
                    X.shape[1],
                    ours_fit_s=ours_fit,
                    sk_fit_s=sk_fit,
                    ours_predict_s=ours_pred,
                    sk_predict_s=sk_pred,
                    note=note,
                )
            )
    return rows
