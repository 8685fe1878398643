"""A real ``python -m service`` (uvicorn) on a free loopback port, for the live tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(data_dir: Path, port: int, **settings: str) -> dict[str, str]:
    """The environment with every ``BSVM_*`` replaced by this server's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BSVM_")}
    env.update(
        BSVM_DATA_DIR=str(data_dir), BSVM_HOST="127.0.0.1", BSVM_PORT=str(port), BSVM_API_KEYS=""
    )
    env.update({f"BSVM_{k.upper()}": v for k, v in settings.items()})
    return env


def wait_ready(base_url: str, process: subprocess.Popen, log: Path) -> None:
    """Poll ``/health/ready`` until 200; fail with the server log if it dies or times out."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{base_url}/health/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server not ready after {START_TIMEOUT_S} s:\n{log.read_text()}")


@contextmanager
def live_server(data_dir: Path, log_dir: Path, **settings: str) -> Iterator[str]:
    """Start the service, yield its base URL, stop it (SIGTERM, then SIGKILL) on exit."""
    port = free_port()
    log = log_dir / f"server-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "service"],
            cwd=ROOT,
            env=server_env(data_dir, port, **settings),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base_url, process, log)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
