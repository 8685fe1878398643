"""The README agrees with the code: the settings table is the one ``Settings`` gives, and every
link, file and module it names exists."""

from __future__ import annotations

import importlib
import importlib.util
import re

import pytest

from scripts.gen_settings_table import README, shown_default, table, with_table
from service.settings import Settings


def test_the_settings_table_is_the_one_settings_gives():
    text = README.read_text()
    assert with_table(text) == text, "run: .venv/bin/python scripts/gen_settings_table.py"


def test_every_setting_has_a_row_with_its_description():
    rows = table().splitlines()[2:]
    assert len(rows) == len(Settings.model_fields)
    for row, (name, field) in zip(rows, Settings.model_fields.items(), strict=True):
        assert row.startswith(f"| `BSVM_{name.upper()}` | {shown_default(field)} | ")
        assert field.description


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("data_dir", "`./var`"),
        ("max_body_mb", "`32`"),
        ("public_docs", "`true`"),
        ("signing_key", "unset"),
        ("api_keys", "empty (open)"),
    ],
)
def test_defaults_are_shown_as_a_reader_would_set_them(name, shown):
    assert shown_default(Settings.model_fields[name]) == shown


def test_a_readme_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="markers"):
        with_table("# no table here\n")


CODE_BLOCK = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")
SPAN = re.compile(r"`([^`\n]+)`")
REPO_PATH = re.compile(r"^[\w-][\w.-]*(/[\w.-]+)+\.\w+$|^[\w-][\w.-]*\.md$")
MODULE = re.compile(r"\b((?:service|bsvm_core|bench)(?:\.\w+)+)(?::(\w+))?")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_every_link_of_the_readme_leads_somewhere():
    text = README.read_text()
    prose = CODE_BLOCK.sub("", text)
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", prose, re.MULTILINE)}
    for target in LINK.findall(prose):
        if target.startswith(("http://", "https://")):
            continue
        if target.startswith("#"):
            assert target[1:] in anchors, f"no heading for {target}"
        else:
            assert (README.parent / target.split("#")[0]).exists(), f"{target} is not in the repo"


def test_every_file_the_readme_names_is_in_the_repository():
    text = README.read_text()
    named = {span for span in SPAN.findall(text) if REPO_PATH.match(span)}
    assert "bench/results.md" in named
    missing = sorted(name for name in named if not (README.parent / name).exists())
    assert not missing, missing


def test_every_module_the_readme_names_exists():
    text = README.read_text()
    found = MODULE.findall(text)
    assert ("bench.load_predict", "") in found
    for module, attribute in found:
        assert importlib.util.find_spec(module) is not None, module
        if attribute:
            assert hasattr(importlib.import_module(module), attribute), f"{module}:{attribute}"
