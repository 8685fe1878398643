"""The committed OpenAPI document: built from an app on default settings, written or checked.

Regenerate ``openapi/openapi.json`` after changing a route or a schema::

    .venv/bin/python scripts/gen_openapi.py          # write it
    .venv/bin/python scripts/gen_openapi.py --check  # exit 1 when it is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from service.api.app import create_app
from service.settings import Settings

DOC_PATH = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"


def render(doc: dict[str, Any]) -> str:
    """The document as the committed file holds it: sorted keys, two-space indent."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def current_document() -> str:
    """The document of an app built on default settings (environment ignored)."""
    return render(create_app(Settings.model_construct()).openapi())


def main(argv: list[str] | None = None) -> int:
    """Write ``openapi/openapi.json``, or with ``--check`` report whether it is current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    parser.add_argument("--output", type=Path, default=DOC_PATH)
    args = parser.parse_args(argv)
    text = current_document()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            sys.stderr.write(f"{args.output} is out of date; run scripts/gen_openapi.py\n")
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    return 0
