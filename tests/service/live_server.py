"""A real ``python -m service`` (uvicorn) on a free loopback port, for the live tests.

Ports are picked below the kernel's ephemeral range, in a slice of their own for each pytest-xdist
worker. A port found free by a bind to port 0 comes from the ephemeral range, where any outgoing
connection (an HTTP client, a database driver, a Dask comm) may take it before the server binds
it; below that range only an explicit bind can, and the slices keep the workers off each other's
ports. ``start_service`` still retries on a new port if the bind loses anyway.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
START_ATTEMPTS = 3
LOWEST_PORT = 10_000
IN_USE = f"[Errno {errno.EADDRINUSE}]"
"""What uvicorn logs when its bind loses the race for the port."""

_handed_out: set[int] = set()
_rng = random.Random()  # its own generator: a test that seeds `random` does not pick the ports


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ports it assigns itself (``ip_local_port_range``), inclusive."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return low, high


def port_slice(worker: str | None = None, workers: int | None = None) -> range:
    """This process's ports: those between ``LOWEST_PORT`` and the ephemeral range (or above it,
    if it starts too low), split evenly among the pytest-xdist workers (``gw0``, ``gw1``, ...)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "") if worker is None else worker
    if workers is None:
        workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    low, high = ephemeral_range()
    start, stop = (LOWEST_PORT, low) if low - LOWEST_PORT >= 1000 else (high + 1, 65536)
    width = (stop - start) // max(workers, 1)
    first = start + (index % max(workers, 1)) * width
    return range(first, first + width)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nobody listens on right now, outside the ephemeral range, never handed out
    before by this process (a server stopped and started again keeps its port)."""
    ports = port_slice()
    for _ in range(200):
        port = _rng.choice(ports) if len(ports) else 0
        if port and port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # nothing free there
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


def stop_process(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def start_service(
    spawn: Callable[[int], tuple[subprocess.Popen, Path]],
) -> tuple[subprocess.Popen, str, Path]:
    """``spawn(port)`` on a free port, then wait until it is ready: (process, base URL, log).

    ``spawn`` starts the server and returns it with its log. A server that exits because another
    process bound its port first is started again on a new port, up to ``START_ATTEMPTS`` times;
    any other failure raises at once, with the log.
    """
    for attempt in range(1, START_ATTEMPTS + 1):
        port = free_port()
        process, log = spawn(port)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, process, log)
            return process, url, log
        except RuntimeError:
            stop_process(process)
            if attempt == START_ATTEMPTS or IN_USE not in log.read_text(errors="replace"):
                raise
    raise AssertionError("unreachable")


def spawn_service(
    data_dir: Path, log_dir: Path, **settings: str
) -> Callable[[int], tuple[subprocess.Popen, Path]]:
    """A ``spawn`` for ``start_service``: ``python -m service`` on ``data_dir``, logging into
    ``log_dir/server-<port>.log``."""

    def spawn(port: int) -> tuple[subprocess.Popen, Path]:
        log = log_dir / f"server-{port}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "service"],
                cwd=ROOT,
                env=server_env(data_dir, port, **settings),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        return process, log

    return spawn


@contextmanager
def live_server(data_dir: Path, log_dir: Path, **settings: str) -> Iterator[str]:
    """Start the service, yield its base URL, stop it (SIGTERM, then SIGKILL) on exit."""
    process, base_url, _ = start_service(spawn_service(data_dir, log_dir, **settings))
    try:
        yield base_url
    finally:
        stop_process(process)
