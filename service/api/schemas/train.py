"""Body of ``POST /train``: a discriminated union on ``model_type``, one member per model type."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from service.api.schemas.labels import Labels
from service.repository.model_types import Registry, build_registry
from service.repository.registry import NAME_PATTERN

Matrix = list[list[float]]


class Evaluation(BaseModel):
    """Hold out a stratified share of the rows and report metrics on it."""

    model_config = ConfigDict(extra="forbid")

    test_fraction: float = Field(0.25, gt=0.0, le=0.5, description="Share of rows held out.")
    random_state: int | None = Field(
        None, ge=0, le=2**32 - 1, description="Seed of the split; null = the model's seed."
    )


class TrainRequestBase(BaseModel):
    """Fields shared by every model type."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    X: Matrix = Field(description="Training rows, one list of numbers per sample.")
    y: Labels = Field(
        description="One label per row: all integers (whole numbers such as 1.0 count) or all "
        "strings."
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
    background: bool = Field(False, description="Answer 202 with a job instead of waiting.")


def _camel(model_type: str) -> str:
    return "".join(part.capitalize() for part in model_type.split("_"))


def build_train_request(registry: Registry) -> Any:
    """The union of every model type's request, tagged by ``model_type``."""
    members = []
    for model_type, spec in registry.items():
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


TrainRequest = build_train_request(build_registry())
