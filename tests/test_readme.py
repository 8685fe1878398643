"""The README agrees with the code: its settings table is the one ``Settings`` gives."""

from __future__ import annotations

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
