"""Write the README's settings table from ``service.settings.Settings`` (``--check``: only compare).

One row per field, in the class's order: the variable ``BSVM_<NAME>``, the default (a field's
``json_schema_extra["shown_default"]`` where the default is computed from other settings), and the
field's description. The table sits between the ``settings:start`` and ``settings:end`` comments.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from service.settings import Settings

README = Path(__file__).resolve().parents[1] / "README.md"
START = "<!-- settings:start (scripts/gen_settings_table.py writes this table) -->"
END = "<!-- settings:end -->"
HEADER = "| variable | default | meaning |\n|---|---|---|"


def shown_default(field: FieldInfo) -> str:
    """The default as a reader sets it: ``true``, ``32``, ``./var``, ``empty``, ``unset``."""
    extra = field.json_schema_extra
    if isinstance(extra, dict) and "shown_default" in extra:
        return str(extra["shown_default"])
    value: Any = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, Path) and not value.is_absolute():
        return f"`./{value}`"
    if value in ([], ""):
        return "empty"
    return f"`{value}`"


def table() -> str:
    """The Markdown table of every setting."""
    rows = []
    for name, field in Settings.model_fields.items():
        if not field.description:
            raise ValueError(f"Settings.{name} has no description")
        meaning = field.description.replace("|", "\\|")
        rows.append(f"| `BSVM_{name.upper()}` | {shown_default(field)} | {meaning} |")
    return "\n".join([HEADER, *rows])


def with_table(text: str) -> str:
    """``text`` (the README) with the table between the markers replaced by the current one."""
    head, found, rest = text.partition(START)
    if not found or END not in rest:
        raise ValueError(f"README.md lacks the markers {START} ... {END}")
    return f"{head}{START}\n{table()}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = README.read_text()
    current = with_table(text)
    if "--check" in args:
        if current != text:
            print("README.md's settings table is out of date: run scripts/gen_settings_table.py")
            return 1
        return 0
    README.write_text(current)
    return 0


if __name__ == "__main__":
    sys.exit(main())
