"""Body of `GET /models/{ref}/path`: the EM/ECME regularisation path over ν."""

from __future__ import annotations

from pydantic import BaseModel, Field

Label = int | str


class RegularisationPath(BaseModel):
    """Posterior modes by EM over a grid of ν (30 values, ±3 decades around the fitted ν)."""

    model_id: str
    alpha: float
    fitted_nu: float = Field(description="The model's ν (ECME: learned; geometric mean per class).")
    fitted_index: int = Field(description="Index of the fitted ν in `nu`.")
    nu: list[float]
    log10_nu: list[float]
    norm: list[float] = Field(description="‖β‖ of the standardised coefficients at each ν.")
    feature_names: list[str]
    classes: list[Label] = Field(
        description="Class of each binary problem: binary one, one-vs-rest each class, "
        "one-vs-one the positive class of each pair."
    )
    versus: list[Label] | None = Field(
        None, description="One-vs-one with more than two classes: the other class of each pair."
    )
    coef: list[list[list[float]]] = Field(description="[ν][problem][feature], original scale.")
    coef_std: list[list[list[float]]] = Field(description="The same on the standardised scale.")
    intercept: list[list[float]] = Field(description="[ν][problem], original scale.")
