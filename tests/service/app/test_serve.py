"""``python -m service``: uvicorn gets the app factory and BSVM_HOST, BSVM_PORT, BSVM_WORKERS;
``scripts/serve.sh`` installs only when its inputs changed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import uvicorn

import service.__main__ as serve


def test_main_starts_the_configured_number_of_workers(monkeypatch):
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.append((a, kw)))
    for key, value in {"BSVM_HOST": "0.0.0.0", "BSVM_PORT": "8123", "BSVM_WORKERS": "3"}.items():
        monkeypatch.setenv(key, value)
    serve.main()
    ((args, kwargs),) = calls
    # several workers need an import string: each process builds its own app from the factory
    assert args == ("service.api.app:create_app",) and kwargs["factory"] is True
    assert (kwargs["host"], kwargs["port"], kwargs["workers"]) == ("0.0.0.0", 8123, 3)


def test_one_worker_by_default(monkeypatch):
    monkeypatch.delenv("BSVM_WORKERS", raising=False)
    assert serve.uvicorn_options(serve.Settings())["workers"] == 1


REPO = Path(__file__).resolve().parents[3]
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../calls"
if [ "$1" = "-VV" ]; then echo "Python 3.11.7 (fake)"; fi
"""


def serve_sh(tmp_path: Path) -> list[str]:
    """Run scripts/serve.sh in a copy of the repository's install inputs whose .venv/bin/python
    only logs its arguments; the calls it got."""
    calls = tmp_path / ".venv" / "calls"
    calls.unlink(missing_ok=True)
    subprocess.run(["bash", str(tmp_path / "scripts" / "serve.sh")], check=True, timeout=60)
    return calls.read_text().splitlines()


def test_serve_sh_installs_only_when_its_inputs_change(tmp_path):
    (tmp_path / "scripts").mkdir()
    for name in ("scripts/serve.sh", "pyproject.toml", "constraints.txt"):
        shutil.copy(REPO / name, tmp_path / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    install = "-m pip install --quiet -c constraints.txt -e .[service]"
    assert serve_sh(tmp_path) == ["-VV", install, "-m service"]
    assert serve_sh(tmp_path) == ["-VV", "-m service"]  # nothing changed: straight to the server
    with (tmp_path / "constraints.txt").open("a") as f:
        f.write("# changed\n")
    assert serve_sh(tmp_path) == ["-VV", install, "-m service"]
