"""KernelSVM's decision values and labels: K(X, support vectors) @ dual_coef_ᵀ + intercept_ in
row blocks, rbf from one product of the support vectors' factor (``rbf_scoring``), labels
screened in float32 and settled in float64, and the row plans of the batched predict routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import rbf_scoring
from ._validation import check_fitted, check_predict_data
from .kernel_rows import kernel_rows
from .kernels import kernel_matrix
from .linear_rows import linear_rows
from .multiclass import label_index, sure_labels
from .rbf_rows import rbf_rows
from .rbf_scoring import (
    FLOAT32_MIN_ENTRIES,
    decision_error_bound,
    exp_float32,
    rbf_exponent,
    rbf_product,
    rbf_support_factor,
)
from .row_plans import RowPlan, Rows, svm_output

if TYPE_CHECKING:
    from .kernel_svm import BinaryKernelModel

PREDICT_BLOCK_MB = 64.0
"""Memory budget of one block of K(X, support vectors) at predict time."""


class KernelDecisions:
    """The decision half of ``KernelSVM`` (a mixin on its fitted attributes: ``support_vectors_``,
    ``dual_coef_``, ``intercept_``, ``binary_models_``, ``binary_problems_``, ``classes_``, the
    kernel's parameters)."""

    kernel: Any
    _gamma: float
    _kernel_args: Any  # KernelSVM's method: the kernel's gamma, degree and coef0

    def _decision_binary(self, model: BinaryKernelModel, X: np.ndarray) -> np.ndarray:
        return self._kernel_times(X, model.support_vectors, model.coef[:, None])[:, 0] + (
            model.intercept
        )

    def _decision_matrix(self, X: np.ndarray, float32_exp: bool = False) -> np.ndarray:
        """All problems at once: K(X, union of support vectors) @ dual_coef_ᵀ + intercept_.

        rbf takes the exponents from one product (``rbf_scoring``); with ``float32_exp`` their
        exponential is taken in float32, within ``rbf_scoring.KERNEL_ERROR`` per kernel entry.
        """
        S, W = self.support_vectors_, self.dual_coef_.T
        if self.kernel == "rbf" and S.shape[0]:
            return self._rbf_times(X, W, float32_exp) + self.intercept_
        return self._kernel_times(X, S, W, getattr(self, "_support_sq", None)) + self.intercept_

    def _rbf_scoring(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(c, R, error): ``rbf_scoring``'s factor of the support vectors and the float32 error
        bound of each problem, made on first use (a fit that never predicts saves them: wine
        ~15 µs) and kept in ``_rbf_kept``, a list made at fit: predict changes no attribute of
        the estimator (scikit-learn's ``check_dict_unchanged``), only that list's content.
        Threads that meet an empty list each make the same arrays from the same inputs and
        append them (atomic); every caller takes the first. Models saved before the list
        existed get one here."""
        kept = self.__dict__.get("_rbf_kept")
        if kept:
            return kept[0]
        center, right = rbf_support_factor(self.support_vectors_, self._gamma)
        made = (center, right, decision_error_bound(self.dual_coef_.T))
        if kept is None:
            self._rbf_kept = kept = []
        kept.append(made)
        return kept[0]

    def _rbf_times(self, X: np.ndarray, W: np.ndarray, float32_exp: bool) -> np.ndarray:
        """K(X, support vectors) @ W for rbf, in row blocks of at most ``PREDICT_BLOCK_MB``."""
        center, right, _ = self._rbf_scoring()
        block = max(1, int(PREDICT_BLOCK_MB * 2**20 // (8 * right.shape[1])))
        if X.shape[0] <= block:
            return self._rbf_kernel(X, center, right, float32_exp) @ W
        out = np.empty((X.shape[0], W.shape[1]))
        for start in range(0, X.shape[0], block):
            rows = slice(start, min(start + block, X.shape[0]))
            np.dot(self._rbf_kernel(X[rows], center, right, float32_exp), W, out=out[rows])
        return out

    def _rbf_kernel(
        self, X: np.ndarray, center: np.ndarray, right: np.ndarray, float32_exp: bool
    ) -> np.ndarray:
        if float32_exp:
            return exp_float32(rbf_product(X, center, right, self._gamma))
        A = rbf_exponent(X, center, right, self._gamma)
        return np.exp(A, out=A)

    def row_plan(
        self, mean: np.ndarray | None = None, scale: np.ndarray | None = None
    ) -> RowPlan | None:
        """The plan of D on rows scaled by (x − ``mean``) / ``scale`` first (``row_plans``): rbf
        folded (``rbf_rows``), linear as the linear model of W = Sᵀα (``linear_rows``), poly and
        sigmoid scaled once (``kernel_rows``); None for a callable kernel or an unfitted model."""
        if callable(self.kernel) or not hasattr(self, "dual_coef_"):
            return None
        S, W = self.support_vectors_, self.dual_coef_.T
        rows: Rows | None
        if self.kernel == "rbf":
            center, right, _ = self._rbf_scoring()
            rows = rbf_rows(center, right[:-2].T, self._gamma, W, self.intercept_, mean, scale)
        elif self.kernel == "linear":
            rows = linear_rows(S.T @ W, self.intercept_, mean, scale, np.abs(S).T @ np.abs(W))
        else:
            rows = kernel_rows(
                S, W, self.intercept_, self.kernel, self._gamma, self.degree, self.coef0,
                mean, scale,
            )  # fmt: skip
        if rows is None:
            return None
        problems, n_classes = self.binary_problems_, self.classes_.size
        return RowPlan(rows, problems, n_classes, svm_output(n_classes, problems))

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels, shape (n_samples,).

        rbf screens with float32 exponentials where they pay (``rbf_scoring.FLOAT32_SCREEN``): a
        row whose label the error bound cannot settle is scored again in float64, so the labels
        are those of the float64 decision values (to float64's own rounding, which BLAS's kernel
        and the batch's shape move).
        """
        check_fitted(self, "binary_models_")
        X = check_predict_data(self, X)
        problems, n_classes = self.binary_problems_, self.classes_.size
        screen = (
            rbf_scoring.FLOAT32_SCREEN
            and self.kernel == "rbf"
            and X.shape[0] * self.support_vectors_.shape[0] >= FLOAT32_MIN_ENTRIES
        )
        if not screen:
            return self.classes_[label_index(self._decision_matrix(X), problems, n_classes)]
        D = self._decision_matrix(X, float32_exp=True)
        error = self._rbf_scoring()[2]
        labels, certain = sure_labels(D, error, problems, n_classes)  # the plans' rule too
        if not certain.all():
            redo = np.flatnonzero(~certain)
            labels[redo] = label_index(self._decision_matrix(X[redo]), problems, n_classes)
        return self.classes_[labels]

    def _kernel_times(
        self, X: np.ndarray, S: np.ndarray, W: np.ndarray, s_sq: np.ndarray | None = None
    ) -> np.ndarray:
        """K(X, S) @ W computed in row blocks of at most ``PREDICT_BLOCK_MB`` megabytes.

        ``s_sq`` are S's squared row norms when known (models fitted before it was kept: None).
        """
        if S.shape[0] == 0:
            return np.zeros((X.shape[0], W.shape[1]))
        block = max(1, int(PREDICT_BLOCK_MB * 2**20 // (8 * S.shape[0])))
        kw = self._kernel_args()
        if X.shape[0] <= block:
            return kernel_matrix(X, S, self.kernel, **kw, z_sq=s_sq) @ W
        out = np.empty((X.shape[0], W.shape[1]))
        for start in range(0, X.shape[0], block):
            stop = min(start + block, X.shape[0])
            out[start:stop] = kernel_matrix(X[start:stop], S, self.kernel, **kw, z_sq=s_sq) @ W
        return out
