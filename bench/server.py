"""A real ``python -m service`` for the load benches: started on a free loopback port, stopped.

Built on the test suite's ``tests.service.live_server`` (the same environment and readiness wait),
with an optional core (or set of cores) to pin the server (and the workers it starts) to, so that
a load generator on another core does not share it; and the CPU seconds and peak RSS of the
server's processes, read from ``/proc`` (Linux).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from tests.service.live_server import ROOT, server_env, start_service


def start_server(
    data_dir: Path,
    *,
    core: int | Iterable[int] | None = None,
    module: Sequence[str] = ("service",),
    **settings: str,
) -> tuple[subprocess.Popen, str]:
    """Start the server on ``data_dir`` (pinned to ``core`` if given); (process, base URL) once ready.

    ``module`` is what follows ``python -m``: the service, or a bench's own server on the same
    uvicorn options.
    """
    cores = None if core is None else ({core} if isinstance(core, int) else set(core))
    data_dir.mkdir(parents=True, exist_ok=True)

    def spawn(port: int) -> tuple[subprocess.Popen, Path]:
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
                preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores is not None else None,
            )
        return process, log

    process, url, _ = start_service(spawn)
    return process, url


def stop_server(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (from ``/proc/<pid>/task/*/children``)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo.extend(int(child) for child in task.read_text().split())
    return out


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of one process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reset_peak_rss(pid: int) -> None:
    """Start ``VmHWM`` (peak RSS) of ``pid`` again from its current RSS (``clear_refs`` 5)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss_mb(pid: int) -> float:
    """``VmHWM`` of ``pid`` in MiB: its peak RSS since start or since ``reset_peak_rss``."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
