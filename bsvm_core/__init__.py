"""bsvm_core: support-vector machines and their classic rivals on numpy and scipy.

Every estimator follows scikit-learn's conventions (``fit``/``predict``/``decision_function``,
``classes_``, ``random_state``) so it works in pipelines and grid searches.
"""

from .exceptions import (
    BsvmValueError,
    BsvmWarning,
    ConvergenceWarning,
    NotSeparableError,
    SingularCovarianceWarning,
)
from .lda import LDA
from .qda import QDA

__all__ = [
    "BsvmValueError",
    "BsvmWarning",
    "ConvergenceWarning",
    "LDA",
    "NotSeparableError",
    "QDA",
    "SingularCovarianceWarning",
]
__version__ = "0.1.0"
