"""A cheap HTTP/1.1 load generator: pre-encoded keep-alive requests over raw asyncio streams.

Run as its own process (pinned to its own core by ``bench.load_predict``), so the server's CPU is
not spent on the clients. Each of ``--clients`` connections sends one request, reads the status
line, the headers up to the blank line and ``Content-Length`` bytes of body, records the latency
and sends the next: a closed loop, one request in flight per connection (``--pipeline N``: N
requests written at once and their N answers read in order, HTTP/1.1 pipelining: one write per
N requests; each answer is still parsed here, so the saving is small, about 15 %). Requests are encoded
once, before the clock starts (cycled through, so the server does not score one row only). Per
request the generator does a ``write``, a ``readuntil``, a ``readexactly`` and a ``perf_counter``;
uvloop is used when installed. It prints one JSON object: requests, errors (non-200), wall and
CPU seconds of the generator, p50/p90/p99/mean latency in ms.

``--trivial`` instead serves a fixed 200 on ``--port`` (the generator's own ceiling is measured
against it: no framework, no parse beyond the headers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

WARMUP_S = 0.5
"""Seconds of load before the clock starts (connections opened, caches warm)."""


def encode_post(host: str, port: int, path: str, body: bytes, content_type: str) -> bytes:
    """One keep-alive ``POST`` as the bytes on the wire."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


def encode_get(host: str, port: int, path: str) -> bytes:
    """One keep-alive ``GET`` as the bytes on the wire."""
    return f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode("ascii")


def content_length(head: bytes) -> int:
    """``Content-Length`` of a response head (0 when absent)."""
    at = head.lower().find(b"\r\ncontent-length:")
    if at < 0:
        return 0
    end = head.find(b"\r\n", at + 2)
    return int(head[at + 17 : end])


async def connection(
    host: str,
    port: int,
    requests: list[bytes],
    offset: int,
    state: dict,
    out: list[float],
    depth: int = 1,
) -> None:
    """Send requests in turn on one keep-alive connection until ``state['stop']``.

    ``depth`` > 1 pipelines (HTTP/1.1): that many requests go out in one write, then their
    answers are read in order; each latency runs from the write to its own answer.
    """
    reader, writer = await asyncio.open_connection(host, port)
    clock = time.perf_counter
    batches = [
        b"".join(requests[(k + j) % len(requests)] for j in range(depth))
        for k in range(0, len(requests) * depth, depth)
    ]
    i = offset
    try:
        while True:
            started = clock()
            if started >= state["stop"]:
                return
            writer.write(batches[i % len(batches)])
            for _ in range(depth):
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(content_length(head))
                if started >= state["start"]:
                    out.append(clock() - started)
                    state["errors"] += head[9:12] != b"200"
            i += 1
    finally:
        writer.close()


async def run(
    host: str, port: int, requests: list[bytes], clients: int, seconds: float, depth: int = 1
) -> dict:
    """Drive ``clients`` connections (``depth`` requests in flight on each) for ``seconds``
    (after a warm-up); the summary."""
    now = time.perf_counter()
    state = {"start": now + WARMUP_S, "stop": now + WARMUP_S + seconds, "errors": 0}
    latencies: list[float] = []
    await asyncio.gather(
        *(connection(host, port, requests, k, state, latencies, depth) for k in range(clients))
    )
    ms = np.asarray(latencies) * 1000
    return {
        "requests": len(ms),
        "errors": state["errors"],
        "seconds": seconds,
        "rate": len(ms) / seconds,
        "p50_ms": float(np.percentile(ms, 50)),
        "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
    }


async def trivial_server(port: int) -> None:
    """Answer every request on ``port`` with a fixed 200 and ``{}``, for ever."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(content_length(head))
                writer.write(answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def _loop_runner():
    """``uvloop.run`` when installed, else ``asyncio.run``."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


def main(argv: list[str] | None = None) -> int:
    """Generate load (requests read from ``--requests``, a JSON list of strings) or serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--requests", type=Path, help="JSON list of raw requests (latin-1)")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--pipeline", type=int, default=1, help="requests in flight per client")
    parser.add_argument("--trivial", action="store_true", help="serve a fixed 200 instead")
    args = parser.parse_args(argv)
    runner = _loop_runner()
    if args.trivial:
        runner(trivial_server(args.port))
        return 0
    requests = [r.encode("latin-1") for r in json.loads(args.requests.read_text())]
    cpu = time.process_time()
    summary = runner(run(args.host, args.port, requests, args.clients, args.seconds, args.pipeline))
    summary["generator_cpu"] = (time.process_time() - cpu) / (args.seconds + WARMUP_S)
    summary["generator_cores"] = sorted(os.sched_getaffinity(0))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
