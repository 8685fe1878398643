"""What a stored model takes and gives: its outputs and its name's versions (V2 metadata)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.repository.store import ModelStore
from service.schemas.outputs import POINT_OUTPUTS, OutputSpec

MAX_VERSIONS = 1000
"""Most versions of one name listed in V2 metadata."""


def outputs_of(estimator: Any, specs: Sequence[OutputSpec] = POINT_OUTPUTS) -> list[str]:
    """Short names of the outputs of ``specs`` this estimator gives (by default the point
    outputs: label and decision always, probability when it has it)."""
    return [spec.short for spec in specs if spec.needs is None or hasattr(estimator, spec.needs)]


def describe(store: ModelStore, ref: str) -> dict[str, Any]:
    """The record ``ref`` resolves to, its name's versions (oldest first) and its outputs."""
    model_id = store.resolve(ref)
    record = store.model_record(model_id)
    estimator = store.load(model_id)
    records, _ = store.list_records(name=record["name"], limit=MAX_VERSIONS)
    versions = sorted({int(r["version"]) for r in records})
    return {"record": record, "versions": versions, "outputs": outputs_of(estimator)}
