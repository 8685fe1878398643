"""KernelSVM (rbf, C=1) against scikit-learn's SVC (libsvm): median fit and predict times."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core.kernel_svm import KernelSVM
from bsvm_core.kernels import rbf_kernel

from .common import row, time_median


def _datasets(quick: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Breast cancer and digits (standardised), make_classification(n, 20 features)."""
    out = []
    for name, loader in (("breast_cancer", load_breast_cancer), ("digits", load_digits)):
        X, y = loader(return_X_y=True)
        out.append((name, StandardScaler().fit_transform(X), y))
    for n in (2000, 5000) if quick else (2000, 5000, 10000, 20000):
        X, y = make_classification(n_samples=n, n_features=20, random_state=0)
        out.append((f"make_classification({n}, 20)", X, y))
    return out


def _binary_objective(svc: SVC, X: np.ndarray) -> float:
    """libsvm's dual objective ½ cᵀKc − Σ|c| from SVC's dual_coef_ (binary problems)."""
    c = svc.dual_coef_[0]
    S = X[svc.support_]
    K = rbf_kernel(S, S, svc._gamma)
    return 0.5 * float(c @ K @ c) - float(np.abs(c).sum())


def run(quick: bool = False) -> list[dict[str, Any]]:
    """Benchmark rows (bench.common format): SVC rbf, C=1, gamma="scale", tol=1e-3."""
    repeat = 1 if quick else 3
    rows = []
    for dataset, X, y in _datasets(quick):
        ours_fit, ours = time_median(lambda X=X, y=y: KernelSVM().fit(X, y), repeat)
        sk_fit, sk = time_median(lambda X=X, y=y: SVC().fit(X, y), repeat)
        ours_pred, ours_labels = time_median(lambda X=X, m=ours: m.predict(X), repeat)
        sk_pred, sk_labels = time_median(lambda X=X, m=sk: m.predict(X), repeat)
        note = f"agree {100 * np.mean(ours_labels == sk_labels):.2f}%"
        note += f", iters {int(ours.n_iter_.sum())} vs {int(np.sum(sk.n_iter_))}"
        if ours.classes_.size == 2:
            rel = abs(ours.objective_[0] / _binary_objective(sk, X) - 1.0)
            note += f", dual obj rel diff {rel:.1e}"
        rows.append(
            row(
                "KernelSVM rbf vs SVC",
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
