"""Body of ``POST /train``: a discriminated union on ``model_type``, one member per model type."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from service.model_types import ModelTypes, model_types
from service.schemas.common import Matrix
from service.schemas.labels import Labels
from service.schemas.names import NAME_PATTERN

TAG_KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class Evaluation(BaseModel):
    """Hold out a stratified share of the rows, cross-validate, or both.

    ``test_fraction`` alone (or an empty object: 0.25) holds rows out (``metrics.heldout``).
    ``cv`` alone runs stratified k-fold CV on all rows (``metrics.cv``); with both, the rows are
    split first and CV runs on the training split. The stored model is fitted on all rows (or on
    the training split).
    """

    model_config = ConfigDict(extra="forbid")

    test_fraction: float | None = Field(
        None,
        gt=0.0,
        le=0.5,
        description="Share of rows held out; null = 0.25 unless cv is given (then none).",
    )
    cv: int | None = Field(
        None, ge=2, le=20, description="Folds of stratified k-fold cross-validation."
    )
    random_state: int | None = Field(
        None,
        ge=0,
        le=2**32 - 1,
        description="Seed of the split and folds; null = the model's seed.",
    )


class DataReference(BaseModel):
    """Training rows by reference: files the server reads itself (``BSVM_DATA_URLS``)."""

    model_config = ConfigDict(extra="forbid")

    uri: str = Field(
        min_length=1,
        max_length=2000,
        description="One object, a prefix ending in `/` (every file under it), or a glob of "
        "shards (`*`, `**`, `[...]`): `s3://bucket/train/*.parquet`, `file:///srv/data/x.csv`. "
        "Must lie under a prefix of BSVM_DATA_URLS.",
    )
    format: Literal["parquet", "csv"] = Field(description="parquet, or csv with a header row.")
    target: str = Field(min_length=1, max_length=200, description="The label column.")
    features: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None,
        min_length=1,
        description="The feature columns, in this order; default every column but the target, in "
        "file order. Each must be numeric.",
    )


class TrainRequestBase(BaseModel):
    """Fields shared by every model type."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    rows_fields: ClassVar[tuple[str, ...]] = ("X", "y")
    """Required unless ``rows_instead`` is given (checked when the task is prepared)."""
    rows_instead: ClassVar[str] = "data"

    X: Matrix | None = Field(
        None, description="Training rows, one list of numbers per sample (or send data)."
    )
    y: Labels | None = Field(
        None,
        min_length=1,
        description="One label per row: all integers (whole numbers such as 1.0 count) or all "
        "strings.",
    )
    data: DataReference | None = Field(
        None,
        description="The rows by reference in place of X and y: always a background job (202).",
    )
    feature_names: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = None
    target: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Name of the label column (a CSV body's ?target=); the record keeps it, and "
        "/predict leaves that column out of rows named by feature_names.",
    )
    name: str | None = Field(
        None, pattern=NAME_PATTERN, description="Model name; defaults to the model type."
    )
    evaluation: Evaluation | None = None
    search: dict[Annotated[str, Field(max_length=64)], list[Any]] | None = Field(
        None,
        description="Grid search: a list of at most 20 values per parameter of the model type, "
        "at most 200 combinations; the best by cross-validation (evaluation.cv folds, default 5) "
        "is refitted on all rows.",
    )
    search_scoring: Literal["accuracy", "f1", "roc_auc"] = Field(
        "accuracy", description="What the search maximises (mean over the folds)."
    )
    background: bool = Field(False, description="Answer 202 with a job instead of waiting.")
    tags: dict[
        Annotated[str, Field(pattern=TAG_KEY_PATTERN)], Annotated[str, Field(max_length=256)]
    ] = Field(default_factory=dict, max_length=20, description="Free-form key/value tags.")
    description: str | None = Field(None, max_length=2000, description="What the model is for.")
    preprocess: Literal["standard", "none"] | None = Field(
        None,
        description="standard: a StandardScaler (training means and SDs) in front of the model, "
        "stored with it, so predict takes raw rows. Default per model type: standard for "
        "linear_svm and kernel_svm (their margin and RBF width depend on the features' scales), "
        "none for lda/qda (affine-invariant) and the Bayesian SVMs (they standardise inside).",
    )
    replace_schema: bool = Field(
        False,
        description="A name keeps the model type and feature set of its first model; true lets "
        "this training change them (409 NAME_SCHEMA_CONFLICT otherwise).",
    )


def _camel(model_type: str) -> str:
    return "".join(part.capitalize() for part in model_type.split("_"))


def build_train_request(types: ModelTypes) -> Any:
    """The union of every model type's request, tagged by ``model_type``."""
    members = []
    for model_type, spec in types.items():
        params_model = spec.params_model
        members.append(
            create_model(
                f"{_camel(model_type)}TrainRequest",
                __base__=TrainRequestBase,
                __doc__=f"Train a `{model_type}`: {params_model.__doc__}",
                model_type=(Literal[model_type], ...),  # type: ignore[valid-type]
                params=(params_model, Field(default_factory=params_model)),
            )
        )
    return Annotated[Union[tuple(members)], Field(discriminator="model_type")]  # noqa: UP007


TrainRequest = build_train_request(model_types())
