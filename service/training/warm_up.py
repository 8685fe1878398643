"""Importing this module fits every quick model type once on a tiny data set, so that the
training forkserver (which preloads it, ``worker.PRELOAD``) has run each fit's lazy imports and
first calls before it forks a worker: a worker's first fit then costs what a warm one does
(breast cancer, kernel_svm: 45-70 ms cold against 15-25 ms).

Model types with draws are skipped (their chains start joblib, which a forkserver must not hold).
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from service.model_types import model_types
from service.training.artifact_write import artifact_bytes
from service.training.fitting import with_preprocessing
from service.training.metrics import classification_metrics

logger = logging.getLogger("service.training.warm_up")

ROWS, FEATURES = 60, 4


def warm_up_fits() -> None:
    """Fit and score each model type without draws once on ``ROWS`` × ``FEATURES`` noise."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(ROWS, FEATURES))
    y = (X[:, 0] + 0.5 * rng.normal(size=ROWS) > 0).astype(int)
    for spec in model_types().values():
        if spec.posterior == "draws":
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = with_preprocessing(spec.make_estimator({}), spec.preprocess).fit(X, y)
                classification_metrics(model, X, y)
                artifact_bytes(model)  # joblib's pickler too (a worker takes the model's bytes)
        except Exception:  # a warm-up only: the real fit reports any problem
            logger.debug("warm-up fit of %s failed", spec.model_type, exc_info=True)


warm_up_fits()
