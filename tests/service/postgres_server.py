"""A real PostgreSQL server for the tests: ``initdb`` + ``pg_ctl`` on a free loopback port.

The server binaries come with Debian's ``postgresql`` package (``scripts/test.sh`` installs it
when they are missing). PostgreSQL refuses to run as root, so as root the server runs as the
``postgres`` user (``runuser``). Each test gets a database of its own; the server is stopped at
the end of the session.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from tests.service.live_server import free_port


def pg_bin(tool: str) -> str:
    """Path of a PostgreSQL server tool (PATH first, then Debian's versioned folders)."""
    found = shutil.which(tool) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"), reverse=True)), None
    )
    if found is None:
        raise RuntimeError(f"{tool} not found: install the postgresql server package")
    return found


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


class PostgresServer:
    """A throw-away cluster on a free loopback port that a fault test can stop and start again.

    ``start()`` after ``stop("immediate")`` brings the same cluster back on the same port (crash
    recovery on the way, as after a power cut).
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bsvm-pg-"))
        self.data, sockets = self.root / "data", self.root / "run"
        sockets.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(sockets, "postgres")
        self.port = free_port()
        subprocess.run(
            _as_server_user(
                [
                    pg_bin("initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                ]
            ),
            check=True,
            capture_output=True,
        )
        self.options = f"-p {self.port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.start()

    @property
    def url(self) -> str:
        """The admin URL, ``postgresql+psycopg://postgres@127.0.0.1:<port>/postgres``."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        cmd = [pg_bin("pg_ctl"), "-D", str(self.data), *args]
        subprocess.run(_as_server_user(cmd), check=check, capture_output=True, timeout=120)

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._pg_ctl("-o", self.options, "-l", str(self.root / "log"), "-w", "start")

    def is_running(self) -> bool:
        """True when ``pg_ctl status`` finds the server running."""
        cmd = [pg_bin("pg_ctl"), "-D", str(self.data), "status"]
        return subprocess.run(_as_server_user(cmd), capture_output=True).returncode == 0

    def stop(self, mode: str = "immediate", check: bool = True) -> None:
        """``pg_ctl stop -m <mode>``: ``immediate`` drops every connection with no shutdown."""
        self._pg_ctl("-m", mode, "stop", check=check)

    def close(self) -> None:
        """Stop the server and remove its files."""
        self.stop(check=False)
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throw-away cluster; yield its admin URL (``postgresql+psycopg://...``); stop it."""
    server = PostgresServer()
    try:
        yield server.url
    finally:
        server.close()


def fresh_database(admin_url: str) -> str:
    """Create an empty database on the server of ``admin_url``; its URL."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    plain = admin_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin_url.rsplit("/", 1)[0] + f"/{name}"
