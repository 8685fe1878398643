"""``bench_distributed``'s data: synthetic Parquet shards of a linear model with label noise, read
back into memory, and the same shards on a moto S3 server on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

N_FEATURES = 20
FEATURES = [f"f{j}" for j in range(N_FEATURES)]
TARGET = "label"
SHARD_ROWS = 500_000
"""Rows a Parquet file holds (the last one of a size may hold fewer)."""
GROUP_ROWS = 125_000
"""Rows a row group holds: one partition of a training by reference."""
QUICK_SHARD_ROWS, QUICK_GROUP_ROWS = 50_000, 12_500
BUCKET = "bsvm-bench"
NOISE = 0.5
"""Label noise: y = [x'w + NOISE·ε > 0], so the classes overlap (a realistic margin band)."""


# -- data -----------------------------------------------------------------------------------------
def true_weights() -> np.ndarray:
    """The weights behind every shard's labels (fixed)."""
    return np.random.default_rng(0).normal(size=N_FEATURES)


def write_shard(path: Path, index: int, rows: int, group_rows: int) -> None:
    """One shard of ``rows`` rows (seeded by its index), row groups of ``group_rows``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng([25, index])
    X = rng.standard_normal((rows, N_FEATURES))
    y = (X @ true_weights() + NOISE * rng.standard_normal(rows) > 0).astype(np.int64)
    table = pa.table({**{name: X[:, j] for j, name in enumerate(FEATURES)}, TARGET: y})
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, row_group_size=group_rows)
    tmp.rename(path)


def ensure_shards(root: Path, n_rows: int, shard_rows: int, group_rows: int) -> Path:
    """The folder of ``n_rows`` rows in shards, written unless a previous run completed it.

    One shard at a time: at most ``shard_rows`` rows are in memory. ``_COMPLETE`` (skipped by the
    service's listings, as every ``_`` name) marks a finished folder.
    """
    folder = root / f"rows-{n_rows}-shard-{shard_rows}-group-{group_rows}"
    done = folder / "_COMPLETE"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for i, first in enumerate(range(0, n_rows, shard_rows)):
        write_shard(
            folder / f"part-{i:05d}.parquet", i, min(shard_rows, n_rows - first), group_rows
        )
    done.write_text(json.dumps({"rows": n_rows, "seconds": time.perf_counter() - start}))
    sys.stderr.write(f"[bench] wrote {folder} in {time.perf_counter() - start:.1f} s\n")
    return folder


def shard_files(folder: Path) -> list[Path]:
    """The shards of a folder, in name order (the order the service reads them in)."""
    return sorted(folder.glob("part-*.parquet"))


def read_rows(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every row of the folder into one C-ordered float64 X (filled shard by shard) and y."""
    import pyarrow.parquet as pq

    files = shard_files(folder)
    n = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    X, y, at = np.empty((n, N_FEATURES)), np.empty(n, dtype=np.int64), 0
    for f in files:
        table = pq.read_table(f)
        rows = table.num_rows
        for j, name in enumerate(FEATURES):
            X[at : at + rows, j] = table.column(name).to_numpy()
        y[at : at + rows] = table.column(TARGET).to_numpy()
        at += rows
        del table
    return X, y


# -- S3 on loopback -------------------------------------------------------------------------------
@contextlib.contextmanager
def moto_s3() -> Iterator[str]:
    """A moto S3 server on a free loopback port with fake credentials and the bench's bucket.

    The credentials go into this process's environment, so that the server and the Dask workers
    started afterwards inherit them (as ``tests/service/conftest.py`` does with monkeypatch).
    """
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        os.environ.pop(name, None)
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        s3_client(endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.stop()


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint)


def upload(endpoint: str, folder: Path) -> str:
    """The folder's shards put under ``s3://BUCKET/<folder name>/``; that prefix."""
    client = s3_client(endpoint)
    start = time.perf_counter()
    for f in shard_files(folder):
        client.upload_file(str(f), BUCKET, f"{folder.name}/{f.name}")
    sys.stderr.write(f"[bench] uploaded {folder.name} in {time.perf_counter() - start:.1f} s\n")
    return f"s3://{BUCKET}/{folder.name}/"
