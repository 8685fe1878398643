"""LinearSVM "auto" against LinearSVC(loss="hinge") and SVC(kernel="linear"): time and objective.

LinearSVC penalises its intercept, so its solution is scored under our objective (unpenalised b)
too; the note of each LinearSVC row gives both primal objectives.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC

from bsvm_core.linear_svm import LinearSVM
from bsvm_core.solvers.linear_objective import primal_objective

from .common import row, time_median

C = 1.0
SVC_MAX_N = 10_000
"""SVC(kernel="linear") is skipped above this size: libsvm's dual takes minutes there."""


def _datasets(quick: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Standardised breast cancer and make_classification(n, 50 features)."""
    X, y = load_breast_cancer(return_X_y=True)
    out = [("breast_cancer (standardised)", StandardScaler().fit_transform(X), y)]
    for n in (5_000, 20_000) if quick else (10_000, 100_000):
        X, y = make_classification(n_samples=n, n_features=50, random_state=0)
        out.append((f"make_classification({n}, 50)", X, y))
    return out


def _objective(model: Any, X: np.ndarray, y: np.ndarray) -> float:
    """Our primal objective at a fitted binary model's (coef_, intercept_), labels {0,1} -> ±1."""
    y_pm = np.where(y == model.classes_[1], 1.0, -1.0)
    return primal_objective(X, y_pm, model.coef_[0], float(model.intercept_[0]), C)


def _fit(make: Any, X: np.ndarray, y: np.ndarray, repeat: int) -> tuple[float, float, Any]:
    """Median fit and predict seconds and the fitted model."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_s, model = time_median(lambda: make().fit(X, y), repeat)
    predict_s, _ = time_median(lambda: model.predict(X), max(repeat, 3))
    return fit_s, predict_s, model


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Benchmark rows (bench.common format): LinearSVM vs LinearSVC and vs SVC linear."""
    repeat = 1 if quick else 3
    rows = []
    for dataset, X, y in _datasets(quick):
        n, d = X.shape
        ours_fit, ours_pred, ours = _fit(lambda: LinearSVM(C=C), X, y, repeat)
        ours_obj = _objective(ours, X, y)
        lin_fit, lin_pred, lin = _fit(lambda: LinearSVC(loss="hinge", C=C), X, y, repeat)
        lin_obj = _objective(lin, X, y)
        capped = " (LinearSVC hit max_iter=1000)" if lin.n_iter_ >= 1000 else ""
        rows.append(
            row(
                "LinearSVM auto vs LinearSVC(hinge)",
                dataset,
                n,
                d,
                ours_fit_s=ours_fit,
                sk_fit_s=lin_fit,
                ours_predict_s=ours_pred,
                sk_predict_s=lin_pred,
                note=f"C={C}; primal objective ours {ours_obj:.6g} vs LinearSVC {lin_obj:.6g}"
                f"{capped}",
            )
        )
        if n > SVC_MAX_N:
            rows.append(
                row(
                    "LinearSVM auto vs SVC(linear)",
                    dataset,
                    n,
                    d,
                    ours_fit_s=ours_fit,
                    ours_predict_s=ours_pred,
                    note=f"SVC(kernel='linear') skipped above n={SVC_MAX_N}: too slow",
                )
            )
            continue
        svc_fit, svc_pred, svc = _fit(lambda: SVC(kernel="linear", C=C), X, y, repeat)
        svc_obj = _objective(svc, X, y)
        gap = float(np.abs(ours.coef_ - svc.coef_).max())
        rows.append(
            row(
                "LinearSVM auto vs SVC(linear)",
                dataset,
                n,
                d,
                ours_fit_s=ours_fit,
                sk_fit_s=svc_fit,
                ours_predict_s=ours_pred,
                sk_predict_s=svc_pred,
                note=f"objective ours {ours_obj:.8g} vs SVC {svc_obj:.8g}; max |Δcoef| {gap:.1e}",
            )
        )
    return rows
