"""``python -m service``: uvicorn gets the app factory and BSVM_HOST, BSVM_PORT, BSVM_WORKERS; a
repository it cannot open at start ends the process with one log line after a bounded retry;
``scripts/serve.sh`` installs only when its inputs changed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import uvicorn

import service.__main__ as serve
from service.repository import opening
from service.repository.opening import StartupFailed, open_store_within
from service.settings import Settings
from tests.service.live_server import free_port


def test_main_starts_the_configured_number_of_workers(monkeypatch, tmp_path):
    monkeypatch.setenv("BSVM_DATA_DIR", str(tmp_path))
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


def start_failing(tmp_path, env: dict[str, str]) -> dict[str, Any]:
    """``python -m service`` with ``env`` in its own process: status 1 and one log line, parsed."""
    env = {**os.environ, "BSVM_STARTUP_TIMEOUT_S": "0.3", "BSVM_PORT": str(free_port()), **env}
    result = subprocess.run(
        [sys.executable, "-m", "service"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == serve.STARTUP_FAILURE != 0, result.stderr
    (line,) = result.stderr.splitlines()
    return json.loads(line)


def test_a_data_folder_it_cannot_use_ends_the_process(tmp_path):
    # a file where the folder should be: refused even to root (a chmod is not, and CI is root)
    blocked = tmp_path / "data"
    blocked.write_text("not a folder")
    record = start_failing(tmp_path, {"BSVM_DATA_DIR": str(blocked)})
    assert record["level"] == "CRITICAL"
    assert record["message"].startswith(f"cannot start: the data folder {blocked} is not usable")
    assert "BSVM_STARTUP_TIMEOUT_S=0.3" in record["message"]


def test_a_database_it_cannot_reach_ends_the_process(tmp_path):
    url = f"postgresql+psycopg://bsvm:hunter2@127.0.0.1:{free_port()}/bsvm"
    env = {"BSVM_DATA_DIR": str(tmp_path), "BSVM_DATABASE_URL": url}
    record = start_failing(tmp_path, env)
    message = record["message"]
    assert message.startswith("cannot start: the database postgresql+psycopg://bsvm:***@127.0.0.1")
    assert "Connection refused" in message and "hunter2" not in message


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_repository_is_retried_with_backoff_until_it_opens(monkeypatch, tmp_path):
    outcomes: list[Any] = [OSError("volume not mounted yet")] * 3 + ["store"]

    def open_store(settings):
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(opening, "open_store", open_store)
    clock = FakeClock()
    store = open_store_within(Settings(data_dir=tmp_path), 10, sleep=clock.sleep, clock=clock)
    assert store == "store" and clock.sleeps == [0.25, 0.5, 1.0]


def test_the_retry_is_bounded_by_the_timeout(monkeypatch, tmp_path):
    def open_store(settings):
        raise PermissionError(13, "Permission denied", str(tmp_path / "registry.db.migrate.lock"))

    monkeypatch.setattr(opening, "open_store", open_store)
    clock = FakeClock()
    with pytest.raises(StartupFailed) as failed:
        open_store_within(Settings(data_dir=tmp_path), 30, sleep=clock.sleep, clock=clock)
    assert clock.now <= 30 and sum(clock.sleeps) > 30 - opening.MAX_DELAY_S
    assert max(clock.sleeps) == opening.MAX_DELAY_S
    message = str(failed.value)
    assert "\n" not in message
    assert f"the data folder {tmp_path} is not usable: PermissionError" in message
    assert "registry.db.migrate.lock" in message
