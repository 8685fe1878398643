"""Types shared by the request bodies."""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
from pydantic import Field, ValidatorFunctionWrapHandler, WrapValidator


def _keep_arrays(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A non-empty 2-D float64 array as it is (a CSV body's parsed rows); anything else validated.

    No JSON body can hold an array: only the CSV conversion (``service.wire.csv_matrix``) puts one
    here, so its rows are not turned into lists and back.
    """
    if isinstance(value, np.ndarray) and value.dtype == np.float64 and value.ndim == 2:
        return value if value.size else handler(value.tolist())
    return handler(value)


#: One row of features: at least one number.
Row = Annotated[list[float], Field(min_length=1)]
#: Rows of features: at least one row (the row and feature caps are settings, checked later).
Matrix = Annotated[list[Row], Field(min_length=1), WrapValidator(_keep_arrays)]
