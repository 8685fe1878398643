"""Bodies of the model routes: the model record, the list page, aliases, the posterior."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Label = int | str


class TrainingInfo(BaseModel):
    """How the fit went."""

    n_samples: int = Field(description="Rows the model was fitted on (the training split).")
    seconds: float = Field(description="Wall-clock seconds of the fit.")
    n_iter: int | list[int] | None = Field(
        None, description="Solver iterations (one per binary problem when there are several)."
    )
    converged: bool | None = Field(None, description="Whether every solver met its tolerance.")
    warnings: list[str] = Field(default_factory=list, description="Warnings raised by the fit.")


class MetricSet(BaseModel):
    """Classification metrics on one data set (binary: of classes[1]; multiclass: macro)."""

    n_samples: int
    accuracy: float
    precision: float
    recall: float
    f1: float
    roc_auc: float | None = Field(
        None,
        description="Binary: from decision values. Multiclass: OvR macro, needs probabilities.",
    )
    average: str = Field(description="'binary' or 'macro'.")


class HeldoutMetrics(MetricSet):
    """Metrics on the stratified held-out split."""

    test_fraction: float
    random_state: int | None


class ModelMetrics(BaseModel):
    """Training-set metrics and, when ``evaluation`` was requested, held-out metrics."""

    train: MetricSet
    heldout: HeldoutMetrics | None = None


class ModelRecord(BaseModel):
    """Everything known about one stored model."""

    model_config = ConfigDict(protected_namespaces=())

    model_id: str
    name: str
    version: int = Field(ge=1)
    aliases: list[str] = Field(default_factory=list)
    model_type: str
    params: dict[str, Any] = Field(description="Every estimator parameter, defaults resolved.")
    classes: list[Label]
    n_features: int
    feature_names: list[str] | None = None
    target: str | None = Field(
        None, description="Name of the label column, when known (CSV ?target=, or `target`)."
    )
    training: TrainingInfo
    metrics: ModelMetrics
    created_at: str = Field(description="UTC time of storage, ISO 8601.")
    random_state: int | None = Field(None, description="Seed the fit used.")
    artifact_sha256: str = Field(description="Hex digest of the artifact (see artifact_digest).")
    artifact_digest: str = Field(description="'sha256', or 'hmac-sha256' with a signing key.")
    artifact_bytes: int
    has_probabilities: bool
    has_posterior: bool
    library_versions: dict[str, str | None]


class ModelList(BaseModel):
    """One page of model records, newest first."""

    items: list[ModelRecord]
    total: int = Field(description="Records matching the filter, over all pages.")
    limit: int
    offset: int


class AliasUpdate(BaseModel):
    """Which version an alias should point at."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"version": 1}]})

    version: int = Field(ge=1, le=10**9, examples=[1])


class CoefficientSummary(BaseModel):
    """Posterior summary of one coefficient (and the intercept); EM/ECME give the mode as mean.

    With more than two classes each row also carries ``class`` (one-vs-rest).
    """

    model_config = ConfigDict(extra="allow")

    name: str
    mean: float | None = None
    sd: float | None = None
    lower: float | None = None
    upper: float | None = None
    ess: float | None = None
    rhat: float | None = None
    inclusion_prob: float | None = Field(None, description="Spike-and-slab only.")
    class_label: Label | None = Field(
        None, alias="class", description="The class (one-vs-rest) when there are more than two."
    )


class Posterior(BaseModel):
    """Coefficient intervals and diagnostics of a Bayesian model."""

    model_id: str
    level: float
    scale: str = Field(description="'original' (units of X) or 'standardised'.")
    coefficients: list[CoefficientSummary] = Field(
        description="Per coefficient and the intercept; with more than two classes, per class."
    )
