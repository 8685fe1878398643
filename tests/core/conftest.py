"""Fixtures shared by the core's tests."""

from __future__ import annotations

import pytest

from bsvm_core.solvers import batched_smo


@pytest.fixture
def checked_gaps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The gaps m − M of the end points batched SMO checked with F from scratch in float64."""
    gaps: list[float] = []
    real = batched_smo.kkt_gap

    def recorded(*args: object) -> float:
        gaps.append(real(*args))
        return gaps[-1]

    monkeypatch.setattr(batched_smo, "kkt_gap", recorded)
    return gaps
