"""Types shared by the request bodies."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

#: One row of features: at least one number.
Row = Annotated[list[float], Field(min_length=1)]
#: Rows of features: at least one row (the row and feature caps are settings, checked later).
Matrix = Annotated[list[Row], Field(min_length=1)]
