"""A real ``python -m service`` for the load benches: started on a free loopback port, stopped.

Built on the test suite's ``tests.service.live_server`` (the same environment and readiness wait),
with an optional core to pin the server (and the training workers it starts) to, so that a load
generator on another core does not share it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.service.live_server import ROOT, free_port, server_env, wait_ready


def start_server(
    data_dir: Path,
    *,
    core: int | None = None,
    module: Sequence[str] = ("service",),
    **settings: str,
) -> tuple[subprocess.Popen, str]:
    """Start the server on ``data_dir`` (pinned to ``core`` if given); (process, base URL) once ready.

    ``module`` is what follows ``python -m``: the service, or a bench's own server on the same
    uvicorn options.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = server_env(data_dir, port, **{"log_level": "warning", **settings})
    env["OPENBLAS_NUM_THREADS"] = "1"
    log = data_dir / f"server-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", *module],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            preexec_fn=(lambda: os.sched_setaffinity(0, {core})) if core is not None else None,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, log)
    except RuntimeError:
        process.kill()
        raise
    return process, url


def stop_server(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
