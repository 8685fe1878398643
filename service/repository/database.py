"""The registry database: one engine per URL, SQLite tuned for several processes, migrations at start.

SQLite (the embedded default) runs in WAL mode with a busy timeout, so any number of processes on
one host can share the file. Write transactions start with ``BEGIN IMMEDIATE``: a deferred
transaction that reads and then writes can deadlock against another writer, which the busy timeout
cannot resolve. Reads use plain deferred transactions and never block writers. PostgreSQL (through
psycopg 3) needs none of this.

Migrations are alembic's (``service/repository/migrations``), applied at start under a lock (an
advisory lock on PostgreSQL, a file lock beside the SQLite file), so replicas starting together
migrate once.
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url

logger = logging.getLogger("service.repository.database")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_MS = 30_000
PG_MIGRATION_LOCK = 0x6273766D  # "bsvm"


def _sqlite_engine(url: str, *, immediate: bool) -> Engine:
    """A SQLite engine in WAL mode with a busy timeout; ``immediate`` writers lock at BEGIN."""
    parsed = make_url(url)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url, connect_args={"timeout": SQLITE_BUSY_MS / 1000, "check_same_thread": False}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's begin event emits BEGIN
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


class Database:
    """A reader and a writer engine on one URL (the same engine except on SQLite)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = make_url(url).get_backend_name()
        if self.dialect == "sqlite":
            self.reader = _sqlite_engine(url, immediate=False)
            self.writer = _sqlite_engine(url, immediate=True)
        else:
            self.reader = self.writer = create_engine(url, pool_pre_ping=True, pool_size=10)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in a read transaction."""
        with self.reader.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A connection in a write transaction, committed on exit (rolled back on error)."""
        with self.writer.begin() as conn:
            yield conn

    def is_usable(self) -> bool:
        """True when the database answers a query."""
        try:
            with self.read() as conn:
                conn.execute(text("SELECT 1"))
        except Exception:
            logger.warning("the registry database does not answer", exc_info=True)
            return False
        return True

    def migrate(self) -> None:
        """Bring the schema to alembic's head, once, whoever else is starting now."""
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self._migration_lock(), self.writer.connect() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
            conn.commit()

    @contextmanager
    def _migration_lock(self) -> Iterator[None]:
        if self.dialect == "sqlite":
            database = make_url(self.url).database
            if not database or database == ":memory:":
                yield
                return
            with open(f"{database}.migrate.lock", "a+") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)
        elif self.dialect == "postgresql":
            with self.writer.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": PG_MIGRATION_LOCK})
                conn.commit()
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_MIGRATION_LOCK})
                    conn.commit()
        else:
            yield

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.reader.dispose()
        if self.writer is not self.reader:
            self.writer.dispose()
