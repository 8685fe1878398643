"""Path and query parameters several routes share: a model reference, a credible level, a scale."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Path, Query

from service.schemas.names import REFERENCE_PATTERN
from service.schemas.predict import MODEL_REF_MAX_CHARS

ModelRef = Annotated[
    str,
    Path(
        pattern=REFERENCE_PATTERN,
        max_length=MODEL_REF_MAX_CHARS,
        description="A model id, or a name (its latest version), `name:version` or `name@alias`.",
    ),
]
Level = Annotated[float, Query(gt=0.0, lt=1.0, description="Credible level.")]
Scale = Annotated[
    Literal["original", "standardised"], Query(description="Units of X or standardised.")
]
