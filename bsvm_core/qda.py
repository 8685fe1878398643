"""Quadratic discriminant analysis: one Gaussian, with its own covariance, per class."""

from __future__ import annotations

import warnings
from numbers import Real
from typing import Any

import numpy as np
from scipy import linalg

from .discriminant import DiscriminantBase
from .exceptions import BsvmValueError, SingularCovarianceWarning

EIGEN_FLOOR = float(np.sqrt(np.finfo(np.float64).eps))
"""Relative eigenvalue floor: a class covariance whose smallest eigenvalue is below
``EIGEN_FLOOR * trace(Σ_k) / d`` (about 1.5e-8 times its mean eigenvalue, i.e. a condition number
beyond what float64 Mahalanobis distances resolve) is treated as singular and lifted by a ridge."""


TINY = float(np.finfo(np.float64).tiny)
"""Smallest normal float64 (2.2e-308): the least eigenvalue a class covariance keeps."""


def covariance_spectrum(Xc: np.ndarray, dof: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-pairs (λ of length d, rotation V (d, d)) of Σ = Xc'Xc / dof, via the SVD of Xc.

    The SVD of the residuals keeps the precision of scikit-learn's QDA; when there are fewer rows
    than features the missing eigenvalues are zero and V is completed to an orthonormal basis.
    """
    n, d = Xc.shape
    _, S, Vt = linalg.svd(Xc / np.sqrt(max(dof, 1)), full_matrices=n < d)
    eigvals = np.zeros(d)
    eigvals[: S.shape[0]] = S**2
    return eigvals, Vt.T


def shrink(eigvals: np.ndarray, reg_param: float) -> np.ndarray:
    """Shrink toward the identity, (1 − r) Σ + r I, on the eigenvalues (scikit-learn's reg_param)."""
    return (1.0 - reg_param) * eigvals + reg_param


def ridge_to_floor(eigvals: np.ndarray, least: float = TINY) -> float:
    """Smallest ridge δ >= 0 with min(λ) + δ >= max(EIGEN_FLOOR · mean(λ), least) (mean 0 counts as 1)."""
    scale = float(np.mean(eigvals))
    floor = max(EIGEN_FLOOR * (scale if scale > 0.0 else 1.0), least)
    return max(0.0, floor - float(np.min(eigvals)))


def gaussian_log_density(
    X: np.ndarray, mean: np.ndarray, eigvals: np.ndarray, rotation: np.ndarray
) -> np.ndarray:
    """log N(x; μ, Σ) + (d/2) log 2π = −½[(x−μ)'VΛ⁻¹V'(x−μ) + Σ log λ] (ESL eq. 4.12)."""
    Z = (X - mean) @ (rotation / np.sqrt(eigvals))
    return -0.5 * (np.einsum("ij,ij->i", Z, Z) + np.sum(np.log(eigvals)))


class QDA(DiscriminantBase):
    """Quadratic discriminant analysis: a Gaussian with its own covariance for every class.

    Each class covariance is the unbiased estimate (divisor n_k − 1), shrunk as scikit-learn's
    ``QuadraticDiscriminantAnalysis`` does: Σ_k ← (1 − reg_param) Σ_k + reg_param I.

    Singular covariances do not stop the fit (scikit-learn raises ``LinAlgError``):

    * if the smallest eigenvalue of a (shrunk) Σ_k is below ``EIGEN_FLOOR · trace(Σ_k) / d``
      (EIGEN_FLOOR = sqrt(float64 eps) ≈ 1.5e-8), the smallest ridge δ that lifts it to that
      floor is added, Σ_k ← Σ_k + δ I, a ``SingularCovarianceWarning`` names the classes, and
      ``reg_applied_[k]`` records δ (0 for classes left untouched). This happens for a feature
      constant within a class (digits), fewer samples than features, or near-collinear features
      (breast cancer: radius, perimeter and area);
    * a class with a single sample has no covariance of its own: it borrows the pooled
      within-class covariance of the other classes (divisor n − K; zero if no class has two
      samples), then the floor above applies; a ``SingularCovarianceWarning`` says so.

    Parameters
    ----------
    priors : array-like of shape (n_classes,), default=None
        Class prior probabilities in the order of ``classes_``; strictly positive, summing to 1.
        ``None`` uses the class frequencies of the training data.
    reg_param : float, default=0.0
        Shrinkage of each class covariance toward the identity, in [0, 1].

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Sorted class labels; the column order of every per-class output.
    n_features_in_ : int
        Number of features seen in ``fit``.
    means_ : ndarray of shape (n_classes, n_features)
        Class means μ_k.
    covariances_ : ndarray of shape (n_classes, n_features, n_features)
        The class covariances used by Bayes' rule: unbiased estimates after ``reg_param``
        shrinkage and any ridge (``reg_applied_``).
    priors_ : ndarray of shape (n_classes,)
        Class priors π_k used by Bayes' rule.
    scalings_ : ndarray of shape (n_classes, n_features)
        Eigenvalues of each entry of ``covariances_``.
    rotations_ : ndarray of shape (n_classes, n_features, n_features)
        Their eigenvectors, as columns.
    reg_applied_ : ndarray of shape (n_classes,)
        Ridge δ_k added to each class covariance to make it positive definite (0 when none).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from bsvm_core.qda import QDA
    >>> X, y = load_iris(return_X_y=True)
    >>> QDA().fit(X, y).score(X, y) > 0.95
    True
    """

    def __init__(self, priors: Any = None, reg_param: float = 0.0) -> None:
        self.priors = priors
        self.reg_param = reg_param

    def _validate_hyperparameters(self) -> None:
        """Raise BsvmValueError unless reg_param is a number in [0, 1]."""
        r = self.reg_param
        if isinstance(r, bool) or not isinstance(r, Real) or not (0.0 <= r <= 1.0):
            raise BsvmValueError(f"reg_param must be a number in [0, 1], got {r!r}.")

    def _fit_gaussians(
        self, residuals: np.ndarray, y_idx: np.ndarray, counts: np.ndarray, max_abs: float
    ) -> None:
        """Estimate, shrink and, where singular, lift each class covariance."""
        n_classes, d = counts.shape[0], residuals.shape[1]
        singletons = [k for k in range(n_classes) if counts[k] < 2]
        pooled = None
        if singletons:
            pooled = covariance_spectrum(residuals, int(counts.sum()) - n_classes)
        self.scalings_ = np.empty((n_classes, d))
        self.rotations_ = np.empty((n_classes, d, d))
        self.reg_applied_ = np.zeros(n_classes)
        # variances below the data's rounding level, (eps max|x|)², are noise; flooring there
        # (and at the smallest normal float) keeps every Mahalanobis distance finite
        least = max(TINY, (float(np.finfo(np.float64).eps) * max_abs) ** 2)
        for k in range(n_classes):
            if pooled is not None and counts[k] < 2:
                eigvals, rotation = pooled
            else:
                eigvals, rotation = covariance_spectrum(residuals[y_idx == k], counts[k] - 1)
            eigvals = shrink(eigvals, float(self.reg_param))
            self.reg_applied_[k] = ridge_to_floor(eigvals, least)
            self.scalings_[k] = eigvals + self.reg_applied_[k]
            self.rotations_[k] = rotation
        self.covariances_ = np.einsum(
            "kij,kj,klj->kil", self.rotations_, self.scalings_, self.rotations_
        )
        self._warn_singular(singletons)

    def _warn_singular(self, singletons: list[int]) -> None:
        """Emit one SingularCovarianceWarning describing what fit did to which classes."""
        lifted = np.flatnonzero(self.reg_applied_ > 0.0)
        parts = []
        if singletons:
            names = [str(self.classes_[k]) for k in singletons]
            parts.append(f"classes {names} have a single sample and use the pooled covariance")
        if lifted.size:
            detail = ", ".join(f"{self.classes_[k]}: {self.reg_applied_[k]:.3g}" for k in lifted)
            parts.append(f"singular class covariances were lifted by a ridge ({detail})")
        if parts:
            warnings.warn(
                "QDA: " + "; ".join(parts) + ". Increase reg_param to regularise explicitly.",
                SingularCovarianceWarning,
                stacklevel=3,
            )

    def _joint_log_likelihood(self, X: np.ndarray) -> np.ndarray:
        """Return log π_k + log N(x; μ_k, Σ_k) + (d/2) log 2π for every class."""
        jll = np.empty((X.shape[0], self.classes_.shape[0]))
        for k in range(self.classes_.shape[0]):
            jll[:, k] = gaussian_log_density(
                X, self.means_[k], self.scalings_[k], self.rotations_[k]
            )
        return jll + np.log(self.priors_)
