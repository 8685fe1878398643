"""pydantic's validation errors as the envelope's details: a field path and the problem.

Every body validated by a pydantic model (FastAPI's, and the predict decoders' own) reports its
errors through ``invalid_fields``, so the same mistake reads the same on every route.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from service.errors import ApiError, BadRequest, ErrorDetail, InvalidInput, detail
from service.model_types import model_types

M = TypeVar("M", bound=BaseModel)
MISSING: Any = object()
"""An empty body, read as JSON: FastAPI's "no body" (``validated`` says "Field required")."""

#: Model types; a discriminated union puts the tag in error locations, which we drop.
MODEL_TYPE_TAGS = frozenset(model_types())
#: Location parts that name a pydantic union member or validator, not a field.
_TYPE_TAG = re.compile(r"^(?:[a-z-]+\[.*\]|int|float|str|bool|none|list|dict)$")
_LOCATION_ROOTS = frozenset({"body", "query", "path", "header", "cookie"})
#: Bound errors re-worded so a bound such as 1e-100 is not spelled out in 100 digits.
_BOUND_WORDS = {
    "greater_than": "greater than",
    "greater_than_equal": "greater than or equal to",
    "less_than": "less than",
    "less_than_equal": "less than or equal to",
}
_BOUND_KEYS = {
    "greater_than": "gt",
    "greater_than_equal": "ge",
    "less_than": "lt",
    "less_than_equal": "le",
}


def field_path(loc: Iterable[int | str]) -> str:
    """``("body", "params", "C")`` → ``"params.C"``; ``("body", "X", 2)`` → ``"X[2]"``."""
    parts = list(loc)
    if len(parts) > 1 and parts[0] in _LOCATION_ROOTS:
        parts = parts[1:]
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in MODEL_TYPE_TAGS or _TYPE_TAG.match(part):
            continue
        else:
            path += f".{part}" if path else part
    return path or "body"


def _problem(error: Mapping[str, Any]) -> str:
    """pydantic's message, with any quoted copy of the offending value taken out."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind == "union_tag_invalid":
        return (
            f"unknown {ctx.get('discriminator', 'tag')}; expected one of {ctx.get('expected_tags')}"
        )
    if kind == "union_tag_not_found":
        return f"missing {ctx.get('discriminator', 'tag')}"
    bound = ctx.get(_BOUND_KEYS.get(kind, ""))
    if isinstance(bound, float) and bound != 0 and not 1e-6 <= abs(bound) < 1e16:
        return f"Input should be {_BOUND_WORDS[kind]} {bound!r}"
    message = str(error.get("msg", "invalid value"))
    value = error.get("input")
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        message = message.replace(f"'{value}'", "the given value")
    return message


def _empty_problem(field: str) -> str:
    """An empty list, in the words the data checks use for an empty ``X`` or row."""
    if field == "X":
        return "must hold at least one row"
    if re.fullmatch(r"X\[\d+\]", field):
        return "rows must hold at least one value"
    return "must not be empty"


def validation_details(errors: Sequence[Mapping[str, Any]]) -> list[ErrorDetail]:
    """pydantic errors as ``ErrorDetail``s, one per distinct (field, problem)."""
    seen: dict[tuple[str, str], ErrorDetail] = {}
    for error in errors:
        field, problem = field_path(error.get("loc", ())), _problem(error)
        if error.get("type") == "too_short" and (error.get("ctx") or {}).get("min_length") == 1:
            problem = _empty_problem(field)
        seen.setdefault((field, problem), ErrorDetail(field=field, problem=problem))
    return list(seen.values())


def invalid_fields(errors: Sequence[Mapping[str, Any]]) -> ApiError:
    """pydantic errors (``loc`` from the body's root) as the 422, or the 400 for bad JSON."""
    if any(e.get("type") == "json_invalid" for e in errors):
        return BadRequest(
            "request body could not be parsed", [detail("body", "the body is not valid JSON")]
        )
    return InvalidInput("request fields are invalid", validation_details(errors))


def validated(model: type[M], value: Any) -> M:
    """``value`` validated as ``model`` as FastAPI validates a body (422 naming the fields);
    ``MISSING`` (an empty body) is "Field required"."""
    if value is MISSING:
        raise invalid_fields([{"type": "missing", "loc": ("body",), "msg": "Field required"}])
    try:
        return model.model_validate(value, from_attributes=True)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        raise invalid_fields(errors) from None
