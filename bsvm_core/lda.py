"""Linear discriminant analysis: Gaussian classes sharing one pooled covariance."""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
from scipy import linalg

from .discriminant import DiscriminantBase
from .exceptions import BsvmValueError
from .linear_rows import linear_rows
from .multiclass import binary_problems
from .row_plans import RowPlan


def pooled_whitening(residuals: np.ndarray, dof: int, tol: float) -> np.ndarray:
    """Factor W (d, r) with W W' = Σ⁺ on the numerical rank of Σ = R'R / dof (R: residuals).

    As scikit-learn's ``svd`` solver: the within-class residuals are scaled to unit column norm
    (so Z'Z is the pooled within-class correlation matrix), Z = U S V', and the directions with
    singular value S <= ``tol`` are dropped; with σ_j the pooled standard deviations (divisor
    ``dof`` = n − K), Σ = diag(σ) V S² V' diag(σ) and W = diag(1/σ) V_r S_r⁻¹.
    """
    norms = np.sqrt(np.einsum("ij,ij->j", residuals, residuals))
    norms[norms == 0.0] = 1.0  # a feature constant within every class carries no direction
    _, sing, Vt = linalg.svd(residuals / norms, full_matrices=False)
    rank = int(np.count_nonzero(sing > tol))
    sigma = norms / np.sqrt(dof)
    return (Vt[:rank] / sigma).T / sing[:rank]


def linear_discriminants(
    means: np.ndarray, priors: np.ndarray, whitening: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Return (coef, intercept) of δ_k(x) = (x−x̄)'Σ⁺m_k − ½m_k'Σ⁺m_k + log π_k, m_k = μ_k − x̄.

    ESL eq. (4.10) shifted by the class-independent x'Σ⁺x̄ − ½x̄'Σ⁺x̄ (x̄ = Σ_k π_k μ_k), which
    leaves the posterior unchanged and keeps the numbers small, as scikit-learn does.
    """
    xbar = priors @ means
    projected = (means - xbar) @ whitening
    coef = projected @ whitening.T
    intercept = -0.5 * np.sum(projected**2, axis=1) + np.log(priors) - coef @ xbar
    return coef, intercept


class LDA(DiscriminantBase):
    """Linear discriminant analysis: Gaussian classes with one shared covariance.

    The pooled covariance is the unbiased within-class estimate (divisor n − K). When it is
    singular (a feature constant within every class, collinear features, d >= n) the model works
    on its numerical rank, exactly like scikit-learn's ``LinearDiscriminantAnalysis(solver="svd")``:
    the directions whose within-class correlation singular value is at most ``tol`` are dropped
    and Σ⁻¹ becomes the pseudo-inverse on the rest.

    Parameters
    ----------
    priors : array-like of shape (n_classes,), default=None
        Class prior probabilities in the order of ``classes_``; strictly positive, summing to 1.
        ``None`` uses the class frequencies of the training data.
    tol : float, default=1e-4
        Rank threshold on the singular values of the within-class correlation factor (>= 0).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Sorted class labels; the column order of every per-class output.
    n_features_in_ : int
        Number of features seen in ``fit``.
    means_ : ndarray of shape (n_classes, n_features)
        Class means μ_k.
    covariance_ : ndarray of shape (n_features, n_features)
        Pooled within-class covariance, unbiased (divisor n − K).
    priors_ : ndarray of shape (n_classes,)
        Class priors π_k used by Bayes' rule.
    coef_ : ndarray of shape (n_classes, n_features), or (1, n_features) for two classes
        Weights of the linear discriminants δ_k(x) = x'coef_[k] + intercept_[k], which equal
        x'Σ⁻¹μ_k − ½μ_k'Σ⁻¹μ_k + log π_k up to a term shared by every class (scikit-learn's
        centring on x̄ = Σ π_k μ_k). For two classes one row: δ_1 − δ_0, the log-odds.
    intercept_ : ndarray of shape (n_classes,), or (1,) for two classes
        Constants of the linear discriminants.
    rank_ : int
        Numerical rank of the pooled covariance used by the model.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from bsvm_core.lda import LDA
    >>> X, y = load_iris(return_X_y=True)
    >>> LDA().fit(X, y).score(X, y) > 0.95
    True
    """

    def __init__(self, priors: Any = None, tol: float = 1e-4) -> None:
        self.priors = priors
        self.tol = tol

    def _validate_hyperparameters(self) -> None:
        """Raise BsvmValueError unless tol is a finite number >= 0."""
        tol = self.tol
        if isinstance(tol, bool) or not isinstance(tol, Real) or not (0.0 <= tol < np.inf):
            raise BsvmValueError(f"tol must be a finite number >= 0, got {tol!r}.")

    def _fit_gaussians(
        self, residuals: np.ndarray, y_idx: np.ndarray, counts: np.ndarray, max_abs: float
    ) -> None:
        """Pool the within-class covariance and build the linear discriminants."""
        dof = max(int(counts.sum()) - counts.shape[0], 1)  # n − K; every class a singleton: 0
        self.covariance_ = residuals.T @ residuals / dof  # unbiased pooled covariance
        whitening = pooled_whitening(residuals, dof, float(self.tol))
        self.rank_ = whitening.shape[1]
        coef, intercept = linear_discriminants(self.means_, self.priors_, whitening)
        if counts.shape[0] == 2:
            coef = coef[1:] - coef[:1]
            intercept = intercept[1:] - intercept[:1]
        self.coef_, self.intercept_ = coef, intercept

    def _joint_log_likelihood(self, X: np.ndarray) -> np.ndarray:
        """Return δ_k(x) for every class; two classes give columns (0, δ_1 − δ_0)."""
        scores = X @ self.coef_.T + self.intercept_
        if self.classes_.shape[0] == 2:
            return np.hstack([np.zeros_like(scores), scores])
        return scores

    def row_plan(
        self, mean: np.ndarray | None = None, scale: np.ndarray | None = None
    ) -> RowPlan | None:
        """The plan of the discriminants D = z coef_ᵀ + intercept_, z = (x − ``mean``) /
        ``scale`` (``linear_rows``): the log-odds (two classes), else argmax labels and
        log-posterior decision values; None unfitted."""
        if not hasattr(self, "coef_"):
            return None
        n_classes = self.classes_.shape[0]
        rows = linear_rows(self.coef_.T, self.intercept_, mean, scale)
        if n_classes == 2:
            return RowPlan(rows, [(1, 0)], 2, "margin")
        return RowPlan(rows, binary_problems(n_classes, "ovr"), n_classes, "log_posterior")
