"""ArtifactStore put/get of 1 MB and 50 MB artifacts: file:// against S3 (moto server), side by side.

Each (backend, size) case runs in its own process so its peak RSS is its own; the moto server
runs in another process (it holds the objects in memory, which is not the client's cost). Run::

    .venv/bin/python bench/bench_artifacts.py [--repeat 5] [--dir /some/disk/folder]

moto is an in-process Python S3 on loopback, so the S3 column measures the client path (s3fs,
HTTP, copies) rather than a real network; on a loaded machine absolute times are noisy and the
s3/file ratio is the figure to read.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUCKET = "bench"
SIZES_MB = (1, 50)
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto(port: int) -> subprocess.Popen:
    """moto's S3 server on ``port`` in a child process; returns once it accepts connections."""
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("moto server did not start")


def run_case(backend: str, size_mb: int, repeat: int, folder: str, endpoint: str) -> dict:
    """Median put and get seconds of one backend and size, and this process's peak RSS."""
    from service.repository.artifacts import ArtifactStore, local_url

    base_rss = peak_rss_mb()
    if backend == "file":
        store = ArtifactStore(local_url(Path(folder) / f"bench-{uuid.uuid4().hex}"))
    else:
        store = ArtifactStore(f"s3://{BUCKET}/{uuid.uuid4().hex}", endpoint_url=endpoint)
    data = os.urandom(size_mb * 2**20)
    puts, gets, ids = [], [], []
    for _ in range(repeat):
        model_id = f"m_{uuid.uuid4().hex}"
        start = time.perf_counter()
        store.put(model_id, data)
        puts.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert len(store.get(model_id)) == len(data)
        gets.append(time.perf_counter() - start)
        ids.append(model_id)
    for model_id in ids:
        store.delete(model_id)
    return {
        "backend": backend,
        "size_mb": size_mb,
        "put_s": statistics.median(puts),
        "get_s": statistics.median(gets),
        "base_rss_mb": base_rss,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    """Start moto, run every case in a fresh process, print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="folder for file://")
    parser.add_argument("--case", nargs=2, metavar=("BACKEND", "SIZE_MB"), help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.update(FAKE_AWS)
    if args.case:
        backend, size = args.case
        print(json.dumps(run_case(backend, int(size), args.repeat, args.dir, args.endpoint)))
        return
    port = free_port()
    moto = start_moto(port)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        rows = {}
        common = ["--repeat", str(args.repeat), "--dir", args.dir, "--endpoint", endpoint]
        for size in SIZES_MB:
            for backend in ("file", "s3"):
                out = subprocess.run(
                    [sys.executable, __file__, "--case", backend, str(size), *common],
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
                rows[backend, size] = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        moto.terminate()
        moto.wait(timeout=30)
    print(f"repeat={args.repeat}, file:// under {args.dir}, s3 = moto server on loopback\n")
    print(
        "| size | backend | put median (s) | get median (s) | put s3/file | get s3/file | "
        "RSS after imports (MiB) | peak RSS (MiB) |"
    )
    print("|" + "---|" * 8)
    for (backend, size), r in rows.items():
        file_row = rows["file", size]
        print(
            f"| {size} MB | {backend} | {r['put_s']:.4f} | {r['get_s']:.4f} | "
            f"{r['put_s'] / file_row['put_s']:.1f}x | {r['get_s'] / file_row['get_s']:.1f}x | "
            f"{r['base_rss_mb']:.0f} | {r['peak_rss_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
