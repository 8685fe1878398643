"""bsvm_core: support-vector machines and their classic rivals on numpy and scipy.

Every estimator follows scikit-learn's conventions (``fit``/``predict``/``decision_function``,
``classes_``, ``random_state``) so it works in pipelines and grid searches.
"""

from .bayesian_svm import BayesianSVM
from .exceptions import (
    BsvmValueError,
    BsvmWarning,
    ConvergenceWarning,
    DataRangeError,
    MCMCConvergenceWarning,
    NotSeparableError,
    SingularCovarianceWarning,
)
from .kernel_svm import KernelSVM
from .lda import LDA
from .linear_svm import LinearSVM
from .memory import estimate_artifact_bytes, estimate_fit_bytes
from .qda import QDA

__all__ = [
    "BayesianSVM",
    "BsvmValueError",
    "BsvmWarning",
    "ConvergenceWarning",
    "DataRangeError",
    "KernelSVM",
    "LDA",
    "LinearSVM",
    "MCMCConvergenceWarning",
    "NotSeparableError",
    "QDA",
    "SingularCovarianceWarning",
    "estimate_artifact_bytes",
    "estimate_fit_bytes",
]
__version__ = "0.1.0"
