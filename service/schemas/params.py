"""The params models of ``POST /train``: one per model type, carrying every bound.

``C`` accepts a positive number, ``"inf"`` or JSON ``Infinity`` (the hard margin of api.md).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_ITER_BOUND = 10_000_000
SEED_MAX = 2**32 - 1

Cost = Annotated[
    float,
    Field(gt=0, description='Cost of a margin violation; `inf` (or "inf") is the hard margin.'),
]
Tol = Annotated[float, Field(gt=0, le=1.0, description="Stopping tolerance.")]
MaxIter = Annotated[int, Field(ge=1, le=MAX_ITER_BOUND, description="Iteration cap.")]
Seed = Annotated[
    int | None,
    Field(ge=0, le=SEED_MAX, description="Seed; the service draws one (and records it) if null."),
]
Priors = Annotated[
    list[Annotated[float, Field(gt=0.0, le=1.0)]] | None,
    Field(max_length=1000, description="Class priors in `classes` order (sum 1); null = estimate."),
]


class Params(BaseModel):
    """Base of every params model: unknown keys are errors (``hints``: what to say about a key
    a newcomer may send that the model does not take)."""

    model_config = ConfigDict(extra="forbid")
    hints: ClassVar[dict[str, str]] = {}


class LDAParams(Params):
    """Linear discriminant analysis."""

    priors: Priors = None
    tol: Tol = 1e-4


class QDAParams(Params):
    """Quadratic discriminant analysis."""

    priors: Priors = None
    reg_param: float = Field(0.0, ge=0.0, le=1.0, description="Shrinkage towards the identity.")


class LinearSVMParams(Params):
    """Linear SVM, ½‖w‖² + C Σ hinge with an unpenalised intercept."""

    C: Cost = 1.0
    solver: Literal["auto", "subgradient"] = "auto"
    fit_intercept: bool = True
    tol: Tol = 1e-4
    max_iter: MaxIter = 1000
    learning_rate: float | None = Field(None, gt=0, le=1e6, description="Subgradient step scale.")
    multiclass: Literal["ovr", "ovo"] = "ovr"
    probability: bool = Field(False, description="Platt probabilities (internal 5-fold CV).")
    random_state: Seed = None


class KernelSVMParams(Params):
    """Kernel SVM trained by SMO."""

    C: Cost = 1.0
    kernel: Literal["linear", "poly", "rbf", "sigmoid"] = "rbf"
    gamma: Literal["scale", "auto"] | Annotated[float, Field(gt=0, le=1e6)] = "scale"
    degree: int = Field(3, ge=1, le=10)
    coef0: float = Field(0.0, ge=-1e6, le=1e6)
    tol: Tol = 1e-3
    max_iter: MaxIter | None = None
    cache_mb: float = Field(200.0, gt=0, le=4096)
    multiclass: Literal["ovo", "ovr"] = "ovo"
    probability: bool = False
    random_state: Seed = None


#: What ``C`` sent to a Bayesian model means there (README: "the ν ↔ C mapping").
NU_FOR_C = (
    "a Bayesian SVM takes nu, not C: its cost is nu = sqrt(C) (send nu; with alpha 2.0 its mode "
    "is the linear SVM with that C)"
)


class _BayesBase(Params):
    hints: ClassVar[dict[str, str]] = {"C": NU_FOR_C, "c": NU_FOR_C}
    alpha: float = Field(1.0, ge=0.1, le=2.0, description="Penalty exponent (1 lasso, 2 ridge).")
    nu: float = Field(
        1.0, ge=1e-100, le=1e6, description="Prior scale; larger means less shrinkage."
    )
    fit_intercept: bool = True
    multiclass: Literal["ovr", "ovo"] = Field(
        "ovr",
        description="More than two classes: one-vs-rest (a model per class, on every row) or "
        "one-vs-one (a model per pair of classes, on the pair's rows; votes as kernel_svm).",
    )
    random_state: Seed = None


class EMParams(_BayesBase):
    """Bayesian SVM, posterior mode by EM (ν fixed)."""

    tol: Tol = 1e-8
    max_iter: MaxIter = 10000


class ECMEParams(EMParams):
    """Bayesian SVM, posterior mode by ECME (ν learned under a Gamma(a_ν, b_ν) prior on ν^-α)."""

    a_nu: float = Field(1.0, ge=1e-100, le=1e6)
    b_nu: float = Field(1.0, ge=1e-100, le=1e6)


class MCMCParams(_BayesBase):
    """Bayesian SVM, posterior draws by Gibbs sampling."""

    learn_nu: bool = False
    a_nu: float = Field(1.0, ge=1e-100, le=1e6)
    b_nu: float = Field(1.0, ge=1e-100, le=1e6)
    n_draws: int = Field(2000, ge=10, le=100_000)
    burn_in: int = Field(500, ge=0, le=100_000)
    n_chains: int = Field(4, ge=1, le=16)
    thin: int = Field(1, ge=1, le=100)


class SpikeSlabParams(_BayesBase):
    """Bayesian SVM with spike-and-slab variable selection (ν fixed; α = 1 Laplace or 2 Gaussian slab)."""

    alpha: Literal[1, 2] = Field(1, description="Slab: 1 Laplace exp(-|β/ν|), 2 Gaussian N(0, ν²).")
    n_draws: int = Field(2000, ge=10, le=100_000)
    burn_in: int = Field(500, ge=0, le=100_000)
    n_chains: int = Field(4, ge=1, le=16)
    thin: int = Field(1, ge=1, le=100)
    prior_inclusion: float = Field(0.5, gt=0.0, lt=1.0)
