"""Breast-cancer evidence table: ``python -m bench.evidence_breast_cancer``.

Stratified 75/25 split (random_state=0); every model sees the raw features (BayesianSVM standardises
inside ``fit``; the SVMs get a StandardScaler pipeline). Bayesian rows use the point estimate only
(mode for EM/ECME, Rao-Blackwellised posterior mean for MCMC): no best-of-many-runs selection.
α = 2 and ν = √C put every Bayesian row on the same model as the C = 1 linear SVMs (bayes-svm.md §1.2);
the spike-and-slab's Gaussian slab N(0, ν²) (§7) has log-density −β²/(2ν²), so its full-inclusion model
is that SVM at ν = √(C/2).
"""

from __future__ import annotations

from typing import Any

from sklearn.datasets import load_breast_cancer
from sklearn.metrics import f1_score, precision_score, recall_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from bsvm_core import BayesianSVM, KernelSVM, LinearSVM

C = 1.0
MCMC = {"n_draws": 1000, "burn_in": 300, "n_chains": 4, "random_state": 0}


def models() -> dict[str, Any]:
    """The compared estimators, by row label."""
    bayes = {"alpha": 2.0, "nu": C**0.5}
    out: dict[str, Any] = {
        "EM (α=2, ν=√C)": BayesianSVM(method="em", **bayes),
        "ECME (α=2, ν learned)": BayesianSVM(method="ecme", **bayes),
        "MCMC (α=2, ν=√C)": BayesianSVM(method="mcmc", **bayes, **MCMC),
        "spike-and-slab (α=2, ν=√(C/2))": BayesianSVM(
            method="spike_slab", alpha=2.0, nu=(C / 2) ** 0.5, **MCMC
        ),
        "LinearSVM": make_pipeline(StandardScaler(), LinearSVM(C=C)),
        "KernelSVM (linear)": make_pipeline(StandardScaler(), KernelSVM(C=C, kernel="linear")),
        "sklearn SVC (linear)": make_pipeline(StandardScaler(), SVC(kernel="linear", C=C)),
    }
    return out


def run() -> list[dict[str, Any]]:
    """Fit every model on the training split; precision, recall and F1 on the test split."""
    X, y = load_breast_cancer(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    rows = []
    for label, est in models().items():
        pred = est.fit(X_tr, y_tr).predict(X_te)
        rows.append({
            "model": label,
            "precision": precision_score(y_te, pred),
            "recall": recall_score(y_te, pred),
            "f1": f1_score(y_te, pred),
        })  # fmt: skip
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (percentages)."""
    lines = ["| model | precision | recall | F1 |", "|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {100 * r['precision']:.1f} | {100 * r['recall']:.1f} | "
            f"{100 * r['f1']:.1f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(run()))
