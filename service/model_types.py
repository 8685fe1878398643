"""The model types: each ``model_type`` of the API mapped to its estimator, its params model and
the facts the rest of the service asks about it (so no module lists model-type names).

The params models carry every bound (``service.schemas.params``); ``POST /train``'s body is a
discriminated union built from this table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from bsvm_core import LDA, QDA, BayesianSVM, KernelSVM, LinearSVM
from service.schemas.params import (
    ECMEParams,
    EMParams,
    KernelSVMParams,
    LDAParams,
    LinearSVMParams,
    MCMCParams,
    Params,
    QDAParams,
    SpikeSlabParams,
)


@dataclass(frozen=True)
class ModelSpec:
    """One model type: how to build its estimator, which params it takes, and what it can do."""

    model_type: str
    estimator_class: type
    params_model: type[Params]
    fixed: dict[str, Any] = field(default_factory=dict)
    posterior: Literal["none", "mode", "draws"] = "none"
    """What the model knows of its coefficients' posterior: nothing, its mode, or draws."""
    preprocess: Literal["standard", "none"] = "none"
    """Default preprocessing: standard for the SVMs, whose margin and RBF width depend on each
    feature's scale; none for LDA/QDA (affine-invariant) and the Bayesian SVMs (which standardise
    inside and report coefficients on both scales)."""
    standardises: bool = False
    """It standardises its features itself and reports coefficients on both scales (so the
    ``standard`` preprocessing does not apply)."""
    margins: bool = False
    """A binary model's decision function is a margin: the boundary plot draws decision = 0 and
    the margins ±1 (otherwise the boundaries between predicted classes)."""
    nu_path: bool = False
    """Training stores the posterior mode over a grid of ν (the regularisation path)."""
    by_partitions: bool = True
    """Trained by reference, it fits by row partitions when its estimator has ``fit_partitions``;
    False: it loads every row into one worker (spike-and-slab: its method fits in memory only)."""
    size_field: str = "X"
    """What to lower when the fitted model would be too large: a params field, or the data (X)."""

    def make_estimator(self, params: dict[str, Any]) -> Any:
        """A fresh estimator with ``params`` (plus this type's fixed ones, e.g. ``method``)."""
        estimator = self.estimator_class(**params, **self.fixed)
        if "n_jobs" in estimator.get_params():
            estimator.set_params(n_jobs=1)  # a training is one worker process; no nested pools
        return estimator


ModelTypes = dict[str, ModelSpec]
"""The model types by name (not to be confused with ``ModelRegistry``, the models stored)."""


def model_types() -> ModelTypes:
    """Every model type of api.md, in its order."""
    svm = {"preprocess": "standard", "margins": True}
    mode = {"posterior": "mode", "standardises": True, "margins": True}
    draws = {**mode, "posterior": "draws", "size_field": "params.n_draws"}
    specs = (
        ModelSpec("linear_svm", LinearSVM, LinearSVMParams, **svm),
        ModelSpec("kernel_svm", KernelSVM, KernelSVMParams, **svm),
        ModelSpec("em_svm", BayesianSVM, EMParams, {"method": "em"}, **mode, nu_path=True),
        ModelSpec("ecme_svm", BayesianSVM, ECMEParams, {"method": "ecme"}, **mode, nu_path=True),
        ModelSpec("mcmc_svm", BayesianSVM, MCMCParams, {"method": "mcmc"}, **draws),
        ModelSpec(
            "spike_slab_svm",
            BayesianSVM,
            SpikeSlabParams,
            {"method": "spike_slab"},
            **draws,
            by_partitions=False,
        ),
        ModelSpec("lda", LDA, LDAParams),
        ModelSpec("qda", QDA, QDAParams),
    )
    return {spec.model_type: spec for spec in specs}


def model_types_with(*posterior: str) -> str:
    """The built-in model types whose posterior is one of ``posterior``, as ``a, b, c``."""
    return ", ".join(t for t, spec in model_types().items() if spec.posterior in posterior)


def final_estimator(model: Any) -> Any:
    """The estimator at the end of a preprocessing pipeline (the model itself otherwise)."""
    steps = getattr(model, "steps", None)
    return steps[-1][1] if steps else model
