"""wrk (https://github.com/wg/wrk) as the load generator, for the runs where it must share cores.

``bench.load_generator`` parses every answer in Python: about 50–60 µs of CPU per request. With
two workers on a two-core machine there is no spare core for it, so that cost comes out of the
server's share and caps the measured two-worker gain (``bench/load_predict.py``). wrk is a C event
loop built for this: one thread, ``clients`` keep-alive connections, one request in flight on
each (the same closed loop). Measured: 10 µs of CPU per request against a fixed answer, 25-36 µs
beside the service on the same two cores (loopback kernel work and wake-ups included). Install it with the system's package
manager (Debian: ``apt-get install wrk``); ``available()`` says whether it is on ``PATH``.

The requests are the same pre-encoded ones, rebuilt by ``wrk.format`` in a Lua script and cycled
through per thread. A ``done`` hook prints one JSON line with the counts and the latency
percentiles, which ``run`` turns into the summary ``bench.load_generator`` prints (requests,
errors, rate, p50/p90/p99/mean ms, generator CPU share).
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import subprocess
import tempfile

WARMUP_S = 1
"""A short wrk run before the measured one (connections opened, caches warm)."""

DONE_HOOK = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "status": %d, "socket": %d, '
    .. '"p50_us": %d, "p90_us": %d, "p99_us": %d, "mean_us": %f}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean))
end
"""


def available() -> bool:
    """Whether a ``wrk`` binary is on ``PATH``."""
    return shutil.which("wrk") is not None


def _lua_long_string(text: str) -> str:
    """``text`` as a Lua long string whose brackets it cannot close."""
    level = 0
    while f"]{'=' * level}]" in text:
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


def lua_script(requests: list[bytes]) -> str:
    """A wrk script that sends ``requests`` (raw HTTP/1.1 bytes) in turn, then prints JSON."""
    built = []
    for raw in requests:
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {
            k.strip(): v.strip()
            for k, v in (line.split(":", 1) for line in lines[1:])
            if k.strip().lower() not in {"host", "content-length"}
        }
        lua_headers = ", ".join(
            f"[ {_lua_long_string(k)} ] = {_lua_long_string(v)}" for k, v in headers.items()
        )
        lua_body = _lua_long_string(body.decode("latin-1")) if body else "nil"
        built.append(
            f'wrk.format("{method}", {_lua_long_string(path)}, {{{lua_headers}}}, {lua_body})'
        )
    return (
        "local requests = {}\nlocal turn = 0\n"
        + "init = function(args)\n  requests = {\n    "
        + ",\n    ".join(built)
        + "\n  }\nend\n"
        + "request = function()\n  turn = turn % #requests + 1\n  return requests[turn]\nend\n"
        + DONE_HOOK
    )


def _children_cpu() -> float:
    """User + system seconds of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _wrk(port: int, script: str, clients: int, seconds: int, cores: set[int]) -> tuple[dict, float]:
    """One wrk run; (its JSON line, its CPU seconds)."""
    command = ["wrk", "-t", "1", "-c", str(clients), "-d", f"{seconds}s", "--timeout", "10s"]
    command += ["-s", script, f"http://127.0.0.1:{port}"]
    cpu = _children_cpu()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
    )
    cpu = _children_cpu() - cpu
    if done.returncode:
        raise RuntimeError(f"wrk failed:\n{done.stderr}")
    line = next(x for x in done.stdout.splitlines() if x.startswith('{"requests"'))
    return json.loads(line), cpu


def run(port: int, requests: list[bytes], clients: int, seconds: float, cores: set[int]) -> dict:
    """Drive ``clients`` connections for ``seconds`` (rounded up) after a warm-up; the summary in
    ``bench.load_generator``'s keys."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(lua_script(requests))
    try:
        warm, _ = _wrk(port, fh.name, clients, WARMUP_S, cores)
        out, cpu = _wrk(port, fh.name, clients, math.ceil(seconds), cores)
    finally:
        os.unlink(fh.name)
    wall = out["duration_us"] / 1e6
    return {
        "requests": out["requests"],
        "errors": out["status"] + out["socket"],
        "seconds": wall,
        "rate": out["requests"] / wall,
        "p50_ms": out["p50_us"] / 1000,
        "p90_ms": out["p90_us"] / 1000,
        "p99_ms": out["p99_us"] / 1000,
        "mean_ms": out["mean_us"] / 1000,
        "generator_cpu": cpu / wall,
        "served": warm["requests"] + out["requests"],
    }
