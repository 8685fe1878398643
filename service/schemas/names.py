"""How models are named in the API: model ids, names, versions, aliases and references."""

from __future__ import annotations

MODEL_ID_PATTERN = r"^m_[0-9a-f]{32}$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
ALIAS_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,31}$"
VERSION_PATTERN = r"^[1-9][0-9]{0,8}$"
"""ASCII digits only (``str.isdigit`` admits other scripts' digits), no leading zero, < 10⁹."""

REFERENCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}([:@][^/]{1,40})?$"
"""A model id or a name, optionally with ``:version`` or ``@alias`` (each checked on resolution)."""
