"""Imports run one way: api → wire → training, inference → plots → repository → bsvm_core (and
training, inference → data → bsvm_core: files by reference); only
api imports fastapi. The base modules (settings, errors, logs, data_checks, schemas, model_types)
may be imported by every layer and import no layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[2] / "service"
BASE = {"settings", "errors", "logs", "data_checks", "schemas", "model_types", "__version__"}
LAYERS = ("api", "wire", "training", "inference", "plots", "repository", "data")
OPTIONAL: set[str] = set()
#: What each layer may import from ``service`` (besides the base modules, which every layer may use).
ALLOWED = {
    "api": {"api", "wire", "training", "inference", "plots", "repository", "data"},
    "wire": {"wire", "inference", "plots", "repository"},
    "training": {"training", "plots", "repository", "data"},
    "inference": {"inference", "plots", "repository", "data"},
    "plots": {"plots", "repository"},
    "repository": {"repository"},
    "data": {"data"},
    "base": set(),
}
WEB = ("fastapi", "starlette", "uvicorn")
#: The base modules that may import ``bsvm_core``: the data checks and the model-type table.
CORE_USERS = {"data_checks", "model_types"}


def _layer(path: Path) -> str:
    rel = path.relative_to(SERVICE).parts
    return rel[0] if rel[0] in LAYERS else "base"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            if node.module == "service":
                names += [f"service.{a.name}" for a in node.names]
    return names


MODULES = sorted(p for p in SERVICE.rglob("*.py") if p.name != "__main__.py")


def test_every_layer_exists() -> None:
    for layer in LAYERS:
        assert (SERVICE / layer / "__init__.py").is_file() or layer in OPTIONAL, layer
    for name in BASE - {"__version__"}:
        assert (SERVICE / f"{name}.py").is_file() or (SERVICE / name / "__init__.py").is_file(), (
            name
        )


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SERVICE)))
def test_imports_run_one_way(path: Path) -> None:
    layer = _layer(path)
    for name in _imports(path):
        parts = name.split(".")
        if parts[0] in WEB:
            assert layer == "api", f"{path.name} ({layer}) imports {name}; only service.api may"
        if parts[0] == "bsvm_core":
            assert layer != "base" or path.stem in CORE_USERS, f"{path.name} imports {name}"
        if parts[0] != "service" or len(parts) < 2:
            continue
        target = parts[1]
        if target in BASE:
            continue
        assert target in ALLOWED[layer], f"{path.relative_to(SERVICE)} ({layer}) imports {name}"


def test_core_never_imports_the_service() -> None:
    core = SERVICE.parent / "bsvm_core"
    for path in core.rglob("*.py"):
        for name in _imports(path):
            assert name.split(".")[0] != "service", f"{path} imports {name}"
