"""Suite-wide collection order: the files with slow tests first.

The test command runs two pytest-xdist workers, each taking one file at a time (``--dist
loadfile``). A long file started last leaves the other worker idle until it ends, so the files
holding ``slow`` tests (servers, containers, browsers, clusters, store faults) are handed out first
and the many short files fill in around them. Within a file the order is unchanged.

xdist itself hands the files out by their number of tests, most first, unless told
``--no-loadscope-reorder``: that put the one-test files (schemathesis, the browsers, the
distributed bench: 10 to 35 s each) last, so this turns it off for every run.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Files in collection order under xdist (``--no-loadscope-reorder``), as ordered below."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Stable reorder: every item of a file that has a ``slow`` item comes before the others."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)
