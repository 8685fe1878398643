"""The registry database: one engine per URL, SQLite tuned for several processes, migrations at start.

SQLite (the embedded default) runs in WAL mode with a busy timeout, so any number of processes on
one host can share the file. Write transactions start with ``BEGIN IMMEDIATE``: a deferred
transaction that reads and then writes can deadlock against another writer, which the busy timeout
cannot resolve. Reads use plain deferred transactions and never block writers. PostgreSQL (through
psycopg 3) needs none of this.

A database that refuses, drops or times out a connection (PostgreSQL stopped, SQLite locked past
its busy timeout, a pool with no connection to give) raises ``DatabaseUnavailable`` (503 with
``Retry-After``) from ``read`` and ``write``, whatever the caller was doing, never the driver's
error; ``outage`` logs when it starts and ends. PostgreSQL connections give up after
``PG_CONNECT_TIMEOUT_S`` and are pinged before reuse, so a restarted server is picked up again
without a restart of ours.

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
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from service.errors import DatabaseUnavailable
from service.repository.faults import Outage

logger = logging.getLogger("service.repository.database")

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_MS = 30_000
PG_MIGRATION_LOCK = 0x6273766D  # "bsvm"
PG_CONNECT_TIMEOUT_S = 5
"""A new PostgreSQL connection that is not up within this is a fault (libpq's minimum is 2)."""
PG_POOL_TIMEOUT_S = 10.0
"""A request waits at most this for a pooled connection when all are taken."""
LAX_COMMIT = {
    "sqlite": ("PRAGMA synchronous=NORMAL", "PRAGMA synchronous=FULL"),
    "postgresql": ("SET LOCAL synchronous_commit TO OFF", None),
}
"""Per dialect: the statement that makes one transaction's commit skip its flush, and the one
that restores durable commits afterwards (SQLite: both run outside the transaction, which may
not change its safety level; None: the setting ends with the transaction)."""


def is_fault(exc: BaseException) -> bool:
    """True when ``exc`` says the database is unreachable or not answering, not that a statement
    was wrong (an integrity error, a bad query)."""
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.TimeoutError):
        return True
    return isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated


def _sqlite_engine(url: str, *, immediate: bool) -> Engine:
    """A SQLite engine in WAL mode, durable commits and a busy timeout; ``immediate`` writers lock
    at BEGIN."""
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
        # FULL: a commit is on disk before it returns (WAL's NORMAL may lose the last commits
        # to an OS crash or power loss), so an acknowledged model's row survives as its
        # artifact does; one WAL flush per commit
        cursor.execute("PRAGMA synchronous=FULL")
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
            connect_args = (
                {"connect_timeout": PG_CONNECT_TIMEOUT_S} if self.dialect == "postgresql" else {}
            )
            self.reader = self.writer = create_engine(
                url,
                pool_pre_ping=True,
                pool_size=10,
                pool_timeout=PG_POOL_TIMEOUT_S,
                connect_args=connect_args,
            )
        self.outage = Outage("database")

    @contextmanager
    def _faults_as_unavailable(self) -> Iterator[None]:
        """Turn a fault of the database (``is_fault``) into ``DatabaseUnavailable``; note the
        outage's start and end."""
        try:
            yield
        except sa_exc.SQLAlchemyError as exc:
            if not is_fault(exc):
                raise
            self.outage.failed(exc)
            raise DatabaseUnavailable(
                "the registry database is not answering; retry shortly"
            ) from exc
        self.outage.answered()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in a read transaction (``DatabaseUnavailable`` when it cannot be had)."""
        with self._faults_as_unavailable(), self.reader.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[Connection]:
        """A connection in a write transaction, committed on exit (rolled back on error);
        ``DatabaseUnavailable`` when the database cannot be reached or drops it.

        ``durable=False``: the commit returns without waiting for its flush (SQLite's
        ``synchronous=NORMAL`` for this one transaction, PostgreSQL's ``synchronous_commit``
        off): visible to every reader at once and kept through a crash of any process, but an
        OS crash may lose it until the next durable commit, whose flush covers it (the log is
        written in order). Only for rows nobody has been answered about yet (a synchronous
        training's job, whose answer comes after the durable commit that stores its model).
        """
        if durable or self.dialect not in LAX_COMMIT:
            with self._faults_as_unavailable(), self.writer.begin() as conn:
                yield conn
            return
        lax, strict = LAX_COMMIT[self.dialect]
        with self._faults_as_unavailable(), self.writer.connect() as conn:
            if strict is None:  # the setting ends with the transaction
                with conn.begin():
                    conn.exec_driver_sql(lax)
                    yield conn
                return
            conn.connection.driver_connection.execute(lax)  # SQLite's: outside a transaction
            try:
                with conn.begin():
                    yield conn
            finally:
                self._restore(conn, strict)

    @staticmethod
    def _restore(conn: Connection, statement: str) -> None:
        """Run ``statement`` on the driver's connection outside any transaction; a connection
        that cannot take it is dropped from the pool (never reused with lax commits)."""
        try:
            conn.connection.driver_connection.execute(statement)
        except Exception:
            logger.warning("a registry connection is dropped: %s failed", statement, exc_info=True)
            conn.invalidate()

    def is_usable(self) -> bool:
        """True when the database answers a query."""
        try:
            with self.read() as conn:
                conn.execute(text("SELECT 1"))
        except DatabaseUnavailable:  # ``outage`` has logged it
            return False
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
