"""Bodies of the model routes: the model record, the list page, aliases, the posterior."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Label = int | str
#: The largest version the registry accepts (its VERSION_PATTERN: 1 to 9 digits).
MAX_VERSION = 999_999_999


class TrainingInfo(BaseModel):
    """How the fit went."""

    n_samples: int = Field(description="Rows the model was fitted on (the training split).")
    seconds: float = Field(description="Wall-clock seconds of the fit.")
    n_iter: int | list[int] | None = Field(
        None, description="Solver iterations (one per binary problem when there are several)."
    )
    converged: bool | None = Field(None, description="Whether every solver met its tolerance.")
    warnings: list[str] = Field(default_factory=list, description="Warnings raised by the fit.")
    partitions: int | None = Field(
        None, description="By reference: partitions (files or row groups) fitted on."
    )
    passes: int | None = Field(
        None, description="By reference, fitted by partitions: passes over the partitions."
    )
    peak_rss_mb: float | None = Field(
        None,
        description="By reference, fitted by partitions: the fit process's peak resident memory "
        "(MiB). It holds a partition or a few, never the data set.",
    )


class DataSourceInfo(BaseModel):
    """Where the rows of a training by reference came from."""

    uri: str = Field(description="The request's URI, normalised.")
    format: str
    target: str
    files: list[str] = Field(description="The files read (at most the first 100 listed).")
    n_files: int
    rows: int = Field(description="Rows read (training and held-out).")


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


class FoldMetrics(MetricSet):
    """Metrics on one fold's test rows."""


class MetricSummary(BaseModel):
    """One number per metric (null where a fold could not give it, e.g. multiclass AUC)."""

    accuracy: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    roc_auc: float | None = None


class CrossValidation(BaseModel):
    """Stratified k-fold cross-validation (shuffled, seeded) of the stored model's parameters."""

    k: int
    random_state: int
    folds: list[FoldMetrics]
    mean: MetricSummary
    sd: MetricSummary = Field(description="Population SD over the folds.")


class ModelMetrics(BaseModel):
    """Training-set metrics and, when ``evaluation`` was requested, held-out and CV metrics."""

    train: MetricSet
    heldout: HeldoutMetrics | None = None
    cv: CrossValidation | None = None


class SearchCandidate(BaseModel):
    """One parameter combination of a grid search and its score over the folds."""

    params: dict[str, Any]
    mean: float | None = None
    sd: float | None = None


class SearchResult(BaseModel):
    """The grid search that chose the stored model's parameters."""

    scoring: str
    k: int
    random_state: int
    best_params: dict[str, Any]
    best_score: float
    results: list[SearchCandidate]


class SignatureInput(BaseModel):
    """One input column."""

    name: str
    type: str = Field(description="Column type; 'double' for every feature.")


class SignatureOutputs(BaseModel):
    """What the model answers."""

    classes: list[Label]
    label_type: str = Field(description="'string' or 'long'.")


class Signature(BaseModel):
    """The model's input and output schema."""

    inputs: list[SignatureInput]
    outputs: SignatureOutputs
    target: str | None = Field(None, description="The label column of a CSV training body.")


class ModelIdentity(BaseModel):
    """Which model: the fields a record and a summary both start with."""

    model_config = ConfigDict(protected_namespaces=())

    model_id: str
    name: str
    version: int = Field(ge=1)
    aliases: list[str] = Field(default_factory=list)
    model_type: str


class ModelRecord(ModelIdentity):
    """Everything known about one stored model."""

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
    artifact_sha256: str = Field(
        description="Hex HMAC-SHA256 of the artifact under the server's signing key (see "
        "artifact_digest)."
    )
    artifact_digest: str = Field(
        description="'hmac-sha256-v2': the signature binds the model id, type and features to "
        "the bytes; 'hmac-sha256' (models saved before, re-signed once loaded): the bytes alone; "
        "'sha256' (a pre-database folder's default): no signature, refused on load."
    )
    artifact_bytes: int
    has_probabilities: bool
    has_posterior: bool
    library_versions: dict[str, str | None]
    tags: dict[str, str] = Field(default_factory=dict, description="Free-form key/value tags.")
    preprocess: str = Field("none", description="standard: a scaler in front of the model.")
    description: str | None = None
    signature: Signature | None = Field(
        None, description="Input features (names, types) and output classes, as MLflow's."
    )
    feature_means: list[float] | None = Field(None, description="Training-row means per feature.")
    feature_min: list[float] | None = None
    feature_max: list[float] | None = None
    search: SearchResult | None = None
    data: DataSourceInfo | None = Field(
        None, description="Training by reference: the source of the rows (else null)."
    )


class ModelList(BaseModel):
    """One page of model records, newest first (``?view=full``)."""

    items: list[ModelRecord]
    total: int = Field(description="Records matching the filter, over all pages.")
    limit: int
    offset: int


class ModelSummary(ModelIdentity):
    """One model in a list: who it is and one number to tell it from its neighbours."""

    created_at: str = Field(description="UTC time of storage, ISO 8601.")
    accuracy: float | None = Field(
        description="The headline metric: mean cross-validated accuracy, else held-out, else "
        "training accuracy."
    )
    accuracy_on: Literal["cv", "heldout", "train"] = Field(description="Where accuracy is from.")

    @classmethod
    def of(cls, record: dict[str, Any]) -> ModelSummary:
        """The summary of a stored record."""
        metrics = record["metrics"]
        if metrics.get("cv"):
            accuracy, on = metrics["cv"]["mean"].get("accuracy"), "cv"
        elif metrics.get("heldout"):
            accuracy, on = metrics["heldout"]["accuracy"], "heldout"
        else:
            accuracy, on = metrics["train"]["accuracy"], "train"
        keys = [*ModelIdentity.model_fields, "created_at"]
        return cls(**{k: record[k] for k in keys}, accuracy=accuracy, accuracy_on=on)


class ModelSummaryList(BaseModel):
    """One page of model summaries, newest first (the default view; ``?view=full`` gives the
    records)."""

    items: list[ModelSummary]
    total: int = Field(description="Models matching the filter, over all pages.")
    limit: int
    offset: int


class AliasList(BaseModel):
    """Every alias of a name and the version it points at."""

    name: str
    aliases: dict[str, int]


class AliasUpdate(BaseModel):
    """Which version an alias should point at."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"version": 1}]})

    version: int = Field(ge=1, le=MAX_VERSION, examples=[1])


class CoefficientSummary(BaseModel):
    """Posterior summary of one coefficient (and the intercept).

    Sampled models (mcmc_svm, spike_slab_svm) give ``mean``, ``sd``, the interval and diagnostics;
    EM and ECME give the posterior ``mode`` only (no draws, so no sd or interval).

    With more than two classes each row also carries ``class``: the problem's class in
    one-vs-rest; in one-vs-one its positive class, and ``versus`` the other class of the pair.
    """

    model_config = ConfigDict(extra="allow")

    name: str
    mean: float | None = Field(None, description="Posterior mean (sampled models).")
    mode: float | None = Field(None, description="Posterior mode (em_svm, ecme_svm).")
    sd: float | None = None
    lower: float | None = None
    upper: float | None = None
    ess: float | None = None
    rhat: float | None = None
    inclusion_prob: float | None = Field(None, description="Spike-and-slab only.")
    class_label: Label | None = Field(
        None,
        alias="class",
        description="With more than two classes: the class of the one-vs-rest problem, or the "
        "positive class of the one-vs-one pair.",
    )
    versus: Label | None = Field(
        None, description="One-vs-one with more than two classes: the pair's other class."
    )


class Posterior(BaseModel):
    """Coefficient intervals and diagnostics of a Bayesian model."""

    model_id: str
    level: float
    scale: str = Field(description="'original' (units of X) or 'standardised'.")
    coefficients: list[CoefficientSummary] = Field(
        description="Per coefficient and the intercept; with more than two classes, per class "
        "(one-vs-rest) or per pair of classes (one-vs-one)."
    )
