"""Errors and warnings raised by bsvm_core.

Hierarchy::

    ValueError
     └── BsvmValueError            invalid data or parameters (NaN, ragged rows, one class, ...)
          ├── NotSeparableError    a hard-margin SVM (C = inf) was fitted on data that are not separable
          └── DataRangeError       data or parameters whose arithmetic would overflow float64
    UserWarning
     └── BsvmWarning
          ├── ConvergenceWarning   a solver stopped at max_iter before reaching its tolerance
          │    └── MCMCConvergenceWarning  MCMC draws with R-hat > 1.01 or bulk ESS < 100
          └── SingularCovarianceWarning  QDA met a class covariance that is singular and regularised it
"""

from __future__ import annotations

from sklearn.exceptions import ConvergenceWarning as _SkConvergenceWarning


class BsvmValueError(ValueError):
    """Invalid input data or parameter values."""


class NotSeparableError(BsvmValueError):
    """A hard-margin fit (C = inf) on data that no hyperplane separates."""


class DataRangeError(BsvmValueError):
    """Data or parameters so large (or small) that the fit's arithmetic would overflow float64."""


class BsvmWarning(UserWarning):
    """Base class of the warnings of bsvm_core."""


class ConvergenceWarning(BsvmWarning, _SkConvergenceWarning):
    """A solver stopped at its iteration cap before reaching its tolerance."""


class MCMCConvergenceWarning(ConvergenceWarning):
    """MCMC draws failed the convergence checks (R-hat > 1.01 or bulk ESS < 100) somewhere."""


class SingularCovarianceWarning(BsvmWarning):
    """A class covariance was singular; QDA regularised it to keep predicting."""
