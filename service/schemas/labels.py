"""The ``y`` of a train body: integers or strings; whole JSON numbers (``1.0``) count as integers."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, StrictInt, StrictStr
from pydantic_core import PydanticCustomError


def _what(value: Any) -> str:
    """A short name for a label that is neither an integer nor a string (numbers shown as sent)."""
    if isinstance(value, float):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return {dict: "an object", list: "a list"}.get(type(value), "a value of another type")


def whole_numbers_as_ints(y: Any) -> Any:
    """Whole floats as ints; ONE error on ``y`` for the first label that is not an int or string."""
    if not isinstance(y, list):
        return y
    out = []
    for value in y:
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise PydanticCustomError(
                "label_type",
                "labels must be integers or strings; {what} is neither",
                {"what": _what(value)},
            )
        out.append(value)
    return out


Labels = Annotated[
    list[StrictInt | Annotated[StrictStr, Field(max_length=200)]],
    BeforeValidator(whole_numbers_as_ints),
]
"""One label per row: integers (whole JSON numbers such as 1.0 included) or strings."""
