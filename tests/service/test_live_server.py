"""The live tests' own helpers: ports below the ephemeral range, and a start that survives a lost
bind (CI once failed on uvicorn's ``[Errno 98]`` for a port handed out by a bind to port 0)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.service import live_server
from tests.service.live_server import (
    IN_USE,
    LOWEST_PORT,
    ephemeral_range,
    free_port,
    port_slice,
    spawn_service,
    start_service,
    stop_process,
)


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_worker_slices_are_disjoint_and_below_the_ephemeral_range(workers: int) -> None:
    low, _ = ephemeral_range()
    slices = [port_slice(f"gw{i}", workers) for i in range(workers)]
    seen: set[int] = set()
    for ports in slices:
        assert len(ports) >= 1000
        assert ports.start >= LOWEST_PORT and ports.stop <= low
        assert seen.isdisjoint(ports)
        seen.update(ports)


def test_free_port_is_bindable_outside_the_ephemeral_range_and_never_repeats() -> None:
    low, high = ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(p in port_slice() and not low <= p <= high for p in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))


def test_a_port_someone_listens_on_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        monkeypatch.setattr(live_server, "port_slice", lambda: range(busy, busy + 1))
        port = free_port()
    assert port != busy


def test_a_server_that_loses_its_bind_starts_again_on_another_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        handed = iter([busy])
        real = live_server.free_port
        monkeypatch.setattr(live_server, "free_port", lambda: next(handed, None) or real())
        process, url, log = start_service(spawn_service(tmp_path / "data", tmp_path))
        try:
            assert not url.endswith(f":{busy}")
            assert httpx.get(f"{url}/health/ready", timeout=5).status_code == 200
            assert IN_USE in (tmp_path / f"server-{busy}.log").read_text()
            assert log != tmp_path / f"server-{busy}.log"
        finally:
            stop_process(process)


def test_any_other_start_failure_raises_at_once_with_the_log(tmp_path: Path) -> None:
    calls = []

    def spawn(port: int) -> tuple[subprocess.Popen, Path]:
        calls.append(port)
        log = tmp_path / f"s-{port}.log"
        log.write_text("boom: no such setting\n")
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]), log

    with pytest.raises(RuntimeError, match="boom: no such setting"):
        start_service(spawn)
    assert len(calls) == 1
