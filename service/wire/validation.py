"""pydantic's validation errors as the envelope's details: a field path and the problem.

Every body validated by a pydantic model (FastAPI's, and the predict decoders' own) reports its
errors through ``invalid_fields``, so the same mistake reads the same on every route. Given the
body's type, the words go where newcomers trip: an unknown key names the allowed ones and the
closest match (``unknown_name``, also used for query parameters and search keys) and any hint its
model keeps for it (``Params.hints``: ``C`` on a Bayesian model); a wrong or missing
``model_type`` is reported on ``model_type``; an empty body lists the required fields; a union
(``gamma``: ``"scale"``, ``"auto"`` or a number) reads as one problem.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from service.errors import ApiError, BadRequest, ErrorDetail, InvalidInput, detail, unknown_name
from service.model_types import model_types

M = TypeVar("M", bound=BaseModel)
MISSING: Any = object()
"""An empty body, read as JSON: FastAPI's "no body" (``validated`` says which fields to send)."""

#: Model types; a discriminated union puts the tag in error locations, which we drop.
MODEL_TYPE_TAGS = frozenset(model_types())
#: Location parts that name a pydantic union member or validator, not a field.
_TYPE_TAG = re.compile(r"^(?:[a-z-]+\[.*\]|constrained-[a-z]+|int|float|str|bool|none|list|dict)$")
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


def _members(annotation: Any) -> list[Any]:
    """The types a value of ``annotation`` may be: ``Annotated`` unwrapped, unions flattened."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [m for arg in get_args(annotation) for m in _members(arg)]
    return [annotation]


def _is_model(candidate: Any) -> bool:
    return isinstance(candidate, type) and issubclass(candidate, BaseModel)


def _tag_fields(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s one-value ``Literal`` fields and their values (a discriminated union's tag)."""
    return {
        name: get_args(field.annotation)[0]
        for name, field in model.model_fields.items()
        if get_origin(field.annotation) is Literal and len(get_args(field.annotation)) == 1
    }


def _tags(model: type[BaseModel]) -> set[Any]:
    return set(_tag_fields(model).values())


def _models_at(annotation: Any, loc: Sequence[int | str]) -> list[type[BaseModel]]:
    """The pydantic models a value at ``loc`` (a location from the body's root) may be."""
    current = [annotation]
    for part in loc:
        members = [m for t in current for m in _members(t)]
        named = [
            m for m in members if _is_model(m) and (part in _tags(m) or m.__name__ == part)
        ]  # a union member's tag or name in the location, not a field
        if named:
            current = named
            continue
        current = []
        for m in members:
            args = get_args(m)
            if _is_model(m) and isinstance(part, str) and part in m.model_fields:
                current.append(m.model_fields[part].annotation)
            elif isinstance(part, int) and get_origin(m) in (list, tuple) and args:
                current.append(args[0])
            elif isinstance(part, str) and get_origin(m) is dict and len(args) == 2:
                current.append(args[1])
    return [m for t in current for m in _members(t) if _is_model(m)]


def _extra_problem(loc: Sequence[int | str], body: Any) -> str:
    """An unknown key: what its model allows, the closest name and the model's hint for it."""
    *parent, name = loc
    models = _models_at(body, parent[1:] if parent[:1] == ["body"] else parent)
    if not models or not isinstance(name, str):
        return "unknown field"
    allowed = {a for m in models for a in m.model_fields}
    hints = {k: v for m in models for k, v in getattr(m, "hints", {}).items()}
    return unknown_name(name, allowed, hints.get(name))


def required_fields(body: Any) -> list[str]:
    """The fields every member of the body's type requires (the discriminator among them)."""
    models = _models_at(body, [])
    if not models:
        return []
    required = [
        {name for name, f in m.model_fields.items() if f.is_required()}
        | set(getattr(m, "rows_fields", ()))
        for m in models
    ]
    tags = [name for name in models[0].model_fields if name in _tag_fields(models[0])]
    order = tags + [name for name in models[0].model_fields if name not in tags]
    return sorted(set.intersection(*required), key=order.index)


def _problem(error: Mapping[str, Any], body: Any = None) -> str:
    """pydantic's message, with any quoted copy of the offending value taken out."""
    kind = error.get("type", "")
    ctx = error.get("ctx") or {}
    if kind == "union_tag_invalid":
        expected = re.findall(r"'([^']*)'", str(ctx.get("expected_tags", "")))
        tag = str(ctx.get("tag", ""))
        return unknown_name(tag, expected)
    if kind == "union_tag_not_found":
        tags = sorted(str(t) for m in _models_at(body, []) for t in _tags(m))
        return f"is required; one of {', '.join(tags)}" if tags else "is required"
    if kind == "extra_forbidden":
        return _extra_problem(list(error.get("loc", ())), body)
    if kind == "missing" and tuple(error.get("loc", ())) == ("body",):
        fields = required_fields(body)
        wanted = f" with {', '.join(fields)}" if fields else ""
        instead = {getattr(m, "rows_instead", None) for m in _models_at(body, [])} - {None}
        if len(instead) == 1:
            wanted += f" (or {instead.pop()} in place of the rows)"
        return f"the body is empty: send a JSON object{wanted}"
    bound = ctx.get(_BOUND_KEYS.get(kind, ""))
    if isinstance(bound, float) and bound != 0 and not 1e-6 <= abs(bound) < 1e16:
        return f"Input should be {_BOUND_WORDS[kind]} {bound!r}"
    message = str(error.get("msg", "invalid value"))
    value = error.get("input")
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        message = message.replace(f"'{value}'", "the given value")
    return message


def _field(error: Mapping[str, Any]) -> str:
    """The field an error is reported on: a union's discriminator rather than the whole body."""
    path = field_path(error.get("loc", ()))
    if error.get("type") in ("union_tag_invalid", "union_tag_not_found"):
        key = str((error.get("ctx") or {}).get("discriminator", "")).strip("'")
        if key:
            return key if path == "body" else f"{path}.{key}"
    return path


def _empty_problem(field: str) -> str:
    """An empty list, in the words the data checks use for an empty ``X`` or row."""
    if field == "X":
        return "must hold at least one row"
    if re.fullmatch(r"X\[\d+\]", field):
        return "rows must hold at least one value"
    return "must not be empty"


def validation_details(errors: Sequence[Mapping[str, Any]], body: Any = None) -> list[ErrorDetail]:
    """pydantic errors as ``ErrorDetail``s, one per field: the problems a union's members found
    with one value read as one ("Input should be 'scale' or 'auto', or a valid number")."""
    problems: dict[str, list[str]] = {}
    for error in errors:
        field, problem = _field(error), _problem(error, body)
        if error.get("type") == "too_short" and (error.get("ctx") or {}).get("min_length") == 1:
            problem = _empty_problem(field)
        if problem not in problems.setdefault(field, []):
            problems[field].append(problem)
    return [ErrorDetail(field=field, problem=_joined(found)) for field, found in problems.items()]


def _joined(problems: list[str]) -> str:
    """Several problems with one field: 'Input should be a, or b'."""
    first, *rest = problems
    lead = "Input should be "
    return ", or ".join(
        [first, *(p.removeprefix(lead) if first.startswith(lead) else p for p in rest)]
    )


def invalid_fields(errors: Sequence[Mapping[str, Any]], body: Any = None) -> ApiError:
    """pydantic errors (``loc`` from the body's root) as the 422, or the 400 for bad JSON;
    ``body`` (the body's type, if known) lets the words name allowed fields."""
    if any(e.get("type") == "json_invalid" for e in errors):
        return BadRequest(
            "request body could not be parsed", [detail("body", "the body is not valid JSON")]
        )
    return InvalidInput("request fields are invalid", validation_details(errors, body))


def validated(model: type[M], value: Any) -> M:
    """``value`` validated as ``model`` as FastAPI validates a body (422 naming the fields);
    ``MISSING`` (an empty body) says which fields to send."""
    if value is MISSING:
        raise invalid_fields(
            [{"type": "missing", "loc": ("body",), "msg": "Field required"}], model
        )
    try:
        return model.model_validate(value, from_attributes=True)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]
        raise invalid_fields(errors, model) from None
