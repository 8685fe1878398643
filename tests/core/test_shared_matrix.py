"""Few problems over one small training set (one-vs-one below the lockstep count and
``SHARED_SUBSET_MAX_ROWS``, one-vs-rest within the dense limit) take their dense matrices from one
kernel matrix of all rows: the same solutions as matrices filled problem by problem, libsvm's dual
objectives, and one fill a fit."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_wine
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

import bsvm_core.kernel_dual as kernel_dual
import bsvm_core.kernel_svm as kernel_svm
from bsvm_core import KernelSVM
from bsvm_core.exceptions import NotSeparableError


def _wine() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.mark.parametrize("multiclass", ["ovo", "ovr"])
@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear"])
@pytest.mark.parametrize("C", [1.0, 10.0])
def test_shared_matrix_gives_the_problem_by_problem_models(
    multiclass: str, kernel: str, C: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    X, y = _wine()
    fills = []
    real = kernel_dual.dense_kernel_matrix
    monkeypatch.setattr(
        kernel_dual, "dense_kernel_matrix", lambda *a, **k: fills.append(1) or real(*a, **k)
    )
    shared = KernelSVM(C=C, kernel=kernel, multiclass=multiclass).fit(X, y)
    assert len(fills) == 1  # one matrix for the three problems
    monkeypatch.setattr(kernel_svm, "shared_matrix_applies", lambda *a: False)
    alone = KernelSVM(C=C, kernel=kernel, multiclass=multiclass).fit(X, y)
    assert len(fills) == 4
    np.testing.assert_allclose(shared.objective_, alone.objective_, rtol=1e-6)
    np.testing.assert_allclose(shared.intercept_, alone.intercept_, atol=1e-3)
    assert np.mean(shared.predict(X) == alone.predict(X)) >= 0.99


@pytest.mark.parametrize("C", [1.0, 10.0])
def test_one_vs_one_pairs_reach_libsvm_objectives(C: float) -> None:
    X, y = _wine()
    ours, svc = KernelSVM(C=C).fit(X, y), SVC(C=C).fit(X, y)
    start = np.concatenate([[0], np.cumsum(svc.n_support_)])
    p = 0
    for i in range(3):
        for j in range(i + 1, 3):
            si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
            S = np.vstack([svc.support_vectors_[si], svc.support_vectors_[sj]])
            c = np.concatenate([svc.dual_coef_[j - 1, si], svc.dual_coef_[i, sj]])
            K = np.exp(-ours._gamma * ((S[:, None, :] - S[None, :, :]) ** 2).sum(-1))
            libsvm = 0.5 * c @ K @ c - np.abs(c).sum()
            assert ours.objective_[p] == pytest.approx(libsvm, rel=1e-3)
            p += 1
    assert np.mean(ours.predict(X) == svc.predict(X)) >= 0.99


def test_hard_margin_on_inseparable_pairs_raises() -> None:
    X, y = _wine()
    rng = np.random.default_rng(0)
    y = rng.permutation(y)  # labels at random: no hyperplane separates them
    with pytest.raises(NotSeparableError):
        KernelSVM(C=float("inf"), kernel="linear").fit(X, y)


def test_the_models_do_not_depend_on_n_jobs() -> None:
    X, y = _wine()
    alone = KernelSVM(C=10.0).fit(X, y)
    for n_jobs in (1, 2):
        other = KernelSVM(C=10.0, n_jobs=n_jobs).fit(X, y)
        np.testing.assert_array_equal(other.dual_coef_, alone.dual_coef_)
        np.testing.assert_array_equal(other.intercept_, alone.intercept_)


def test_large_sets_solve_one_problem_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = _wine()
    monkeypatch.setattr(
        kernel_dual, "solve_on_shared_matrix", lambda *a, **k: pytest.fail("shared matrix used")
    )
    monkeypatch.setattr(
        kernel_svm, "solve_on_shared_matrix", lambda *a, **k: pytest.fail("shared matrix used")
    )
    KernelSVM(cache_mb=0.1).fit(X, y)  # 178² float64 = 0.24 MB
    KernelSVM(kernel=lambda A, B: A @ B.T).fit(X, y)
    many = np.tile(X, (2, 1)) + np.random.default_rng(0).normal(0.0, 0.1, (356, X.shape[1]))
    KernelSVM().fit(many, np.tile(y, 2))  # one-vs-one beyond SHARED_SUBSET_MAX_ROWS


def test_one_vs_rest_shares_the_matrix_beyond_the_one_vs_one_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y = _wine()
    X = np.tile(X, (2, 1)) + np.random.default_rng(0).normal(0.0, 0.1, (356, X.shape[1]))
    y = np.tile(y, 2)
    calls = []
    real = kernel_svm.solve_on_shared_matrix
    monkeypatch.setattr(
        kernel_svm, "solve_on_shared_matrix", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    shared = KernelSVM(multiclass="ovr").fit(X, y)
    assert calls
    monkeypatch.setattr(kernel_svm, "shared_matrix_applies", lambda *a: False)
    alone = KernelSVM(multiclass="ovr").fit(X, y)
    np.testing.assert_allclose(shared.objective_, alone.objective_, rtol=1e-6)
