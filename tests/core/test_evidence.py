"""The breast-cancer evidence of the README: each Bayesian SVM's F1 within 1 point of SVC's."""

from __future__ import annotations

from bench.evidence_breast_cancer import run


def test_bayesian_f1_within_one_point_of_svc() -> None:
    rows = {r["model"]: r for r in run()}
    svc = rows.pop("sklearn SVC (linear)")["f1"]
    bayes = [name for name in rows if name.startswith(("EM", "ECME", "MCMC", "spike"))]
    assert len(bayes) == 4
    for name in bayes:
        assert abs(rows[name]["f1"] - svc) <= 0.01, (name, rows[name]["f1"], svc)
    for name in ("LinearSVM", "KernelSVM (linear)"):
        assert abs(rows[name]["f1"] - svc) <= 0.01, (name, rows[name]["f1"], svc)
