"""The registry on SQLite and on a real PostgreSQL: versions, aliases, lookups, migrations."""

from __future__ import annotations

import multiprocessing
import uuid

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import event, text

from service.errors import InvalidInput, NotFound
from service.repository.database import Database
from service.repository.registry import ModelRegistry
from service.repository.tables import metadata


def record(name: str = "demo") -> dict:
    return {"name": name, "model_type": "lda", "classes": [0, 1]}


def new_id() -> str:
    return f"m_{uuid.uuid4().hex}"


@pytest.fixture()
def registry(database_url: str) -> ModelRegistry:
    db = Database(database_url)
    db.migrate()
    yield ModelRegistry(db)
    db.dispose()


def test_migrations_build_exactly_the_declared_tables(registry):
    with registry.db.writer.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []
    registry.db.migrate()  # a second start (or replica) finds it at head


def _allocate(url: str, name: str, n: int, queue) -> None:
    registry = ModelRegistry(Database(url))
    queue.put([registry.add(new_id(), record(name), 10)["version"] for _ in range(n)])


def test_concurrent_processes_get_distinct_versions(registry):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    workers = [
        ctx.Process(target=_allocate, args=(registry.db.url, "race", 8, queue)) for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    versions = sorted(v for _ in workers for v in queue.get(timeout=120))
    for worker in workers:
        worker.join(timeout=60)
    assert versions == list(range(1, 33))
    _, total = registry.list_records(name="race")
    assert total == 32


def test_versions_never_reused_and_references_resolve(registry):
    a = registry.add(new_id(), record(), 10)
    b = registry.add(new_id(), record(), 10)
    registry.delete(b["model_id"])
    c = registry.add(new_id(), record(), 10)
    assert (a["version"], c["version"]) == (1, 3)
    registry.set_alias("demo", "stable", 1)
    assert registry.resolve("demo") == c["model_id"]
    assert registry.resolve("demo:1") == a["model_id"]
    assert registry.resolve("demo@stable") == a["model_id"]
    assert registry.get_record(a["model_id"])["aliases"] == ["stable"]
    registry.set_alias("demo", "stable", 3)
    assert registry.resolve("demo@stable") == c["model_id"]
    for missing in ("demo:2", "demo@canary", "other", new_id()):
        with pytest.raises(NotFound):
            registry.resolve(missing)
    for bad in ("demo:١", "demo:true", "demo:01", "demo:0", "demo:1000000000", "a/b", "x@1"):
        with pytest.raises(InvalidInput):
            registry.resolve(bad)


def test_a_reference_is_one_query(registry):
    for _ in range(3):
        registry.add(new_id(), record(), 10)
    registry.set_alias("demo", "stable", 2)
    statements: list[str] = []

    def count(conn, cursor, statement, *args) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    event.listen(registry.db.reader, "before_cursor_execute", count)
    try:
        for ref in ("demo", "demo:2", "demo@stable"):
            statements.clear()
            registry.resolve(ref)
            assert len(statements) == 1, statements
    finally:
        event.remove(registry.db.reader, "before_cursor_execute", count)


def test_lookups_use_indexes_not_scans(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'r.db'}")
    db.migrate()
    registry = ModelRegistry(db)
    registry.add(new_id(), record(), 10)
    registry.set_alias("demo", "stable", 1)
    queries = {
        "latest": "SELECT model_id FROM models WHERE name = 'demo' ORDER BY version DESC LIMIT 1",
        "version": "SELECT model_id FROM models WHERE name = 'demo' AND version = 1",
        "alias": "SELECT models.model_id FROM models JOIN aliases ON aliases.name = models.name "
        "AND aliases.version = models.version WHERE aliases.name = 'demo' AND aliases.alias = 's'",
    }
    with db.read() as conn:
        for label, query in queries.items():
            plan = " ".join(str(r[-1]) for r in conn.execute(text(f"EXPLAIN QUERY PLAN {query}")))
            assert "SCAN models" not in plan and "SCAN aliases" not in plan, (label, plan)


def test_sqlite_commits_are_on_disk_before_they_return(tmp_path):
    """WAL with ``synchronous=FULL``: an acknowledged model's row survives an OS crash, as its
    fsynced artifact does (``NORMAL`` may lose the last commits)."""
    db = Database(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        for engine in (db.writer, db.reader):
            with engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
    finally:
        db.dispose()


def test_a_lax_commit_skips_only_its_own_flush(tmp_path):
    """``write(durable=False)``: that transaction commits with ``synchronous=NORMAL``, is visible
    at once, and the connection goes back to the pool with ``FULL`` again."""
    db = Database(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        with db.write() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        with db.write(durable=False) as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL here
            conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        with db.read() as conn:
            assert conn.exec_driver_sql("SELECT x FROM t").scalar() == 1
        with pytest.raises(RuntimeError), db.write(durable=False) as conn:
            conn.exec_driver_sql("INSERT INTO t VALUES (2)")
            raise RuntimeError("rolled back")
        with db.write() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1
    finally:
        db.dispose()
