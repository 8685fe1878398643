"""The grammar of model references: ids, names, aliases, ``name:version``, ``name@alias``."""

from __future__ import annotations

import re

from service.errors import InvalidInput, detail
from service.schemas.names import ALIAS_PATTERN, MODEL_ID_PATTERN, NAME_PATTERN, VERSION_PATTERN

_ID_RE = re.compile(MODEL_ID_PATTERN)
_NAME_RE = re.compile(NAME_PATTERN)
_ALIAS_RE = re.compile(ALIAS_PATTERN)
_VERSION_RE = re.compile(VERSION_PATTERN)


def is_model_id(value: str) -> bool:
    """True when ``value`` has the shape of a server-generated model id."""
    return bool(_ID_RE.fullmatch(value))


def check_name(name: str, field: str = "name") -> str:
    """Return ``name`` or raise 422 unless it matches ``NAME_PATTERN``."""
    if not _NAME_RE.fullmatch(name):
        raise InvalidInput("invalid model name", [detail(field, f"must match {NAME_PATTERN}")])
    return name


def check_alias(alias: str, field: str = "alias") -> str:
    """Return ``alias`` or raise 422 unless it matches ``ALIAS_PATTERN``."""
    if not _ALIAS_RE.fullmatch(alias):
        raise InvalidInput("invalid alias", [detail(field, f"must match {ALIAS_PATTERN}")])
    return alias


def parse_reference(ref: str, field: str = "model") -> tuple[str, str | None, int | None]:
    """``name``, ``name@alias`` or ``name:version`` → (name, alias, version); 422 when malformed."""
    name, sep, rest = ref.partition("@")
    alias = version = None
    if sep:
        alias = rest
        if not _ALIAS_RE.fullmatch(rest):
            raise InvalidInput(
                "invalid model reference", [detail(field, f"alias must match {ALIAS_PATTERN}")]
            )
    else:
        name, sep, rest = ref.partition(":")
        if sep:
            if not _VERSION_RE.fullmatch(rest):
                raise InvalidInput(
                    "invalid model reference",
                    [detail(field, "version must be a whole number from 1 to 999999999")],
                )
            version = int(rest)
    check_name(name, field)
    return name, alias, version
