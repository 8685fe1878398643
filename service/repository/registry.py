"""The model registry in the database: records, names with versions, aliases, reference lookup.

Every question is one indexed query: a model id by primary key, ``name`` (latest) and
``name:version`` through ``UNIQUE (name, version)``, ``name@alias`` through the aliases' primary
key joined to it. A version is allocated by incrementing ``names.next_version`` in the same write
transaction that inserts the model row, so concurrent trainings of one name from any number of
processes get distinct versions, and versions are never reused after a delete.

Resolved references are kept in memory for a short period (``reference_cache``); every write
made through this registry forgets them, so this process sees its own writes at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from service.errors import NameSchemaConflict, NotFound, detail
from service.repository.database import Database
from service.repository.reference_cache import RESOLVE_CACHE_S, ReferenceCache
from service.repository.references import check_alias, check_name, is_model_id, parse_reference
from service.repository.tables import aliases, model_tags, models, names


def now_iso() -> str:
    """UTC now as ISO 8601 with milliseconds (sorts as text)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def record_signature(record: dict[str, Any]) -> dict[str, Any]:
    """The input features a model expects: their count and names (None when unnamed)."""
    return {"n_features": record.get("n_features"), "feature_names": record.get("feature_names")}


def schema_conflict(
    held_type: str | None,
    held_signature: dict[str, Any] | None,
    model_type: str,
    signature: dict[str, Any],
) -> str | None:
    """What differs between a name's fixed type and features and a new model's; None if nothing."""
    if held_type is not None and held_type != model_type:
        return f"{held_type} models, not {model_type}"
    if held_signature is not None and held_signature != signature:
        names_held = held_signature.get("feature_names")
        if held_signature.get("n_features") != signature.get("n_features"):
            return f"models of {held_signature.get('n_features')} features, not {signature.get('n_features')}"
        return f"models of the features {names_held}, not {signature.get('feature_names')}"
    return None


class ModelRegistry:
    """Model records, names, versions and aliases in one database."""

    def __init__(
        self, db: Database, resolve_cache_s: float = RESOLVE_CACHE_S, stale_if_error_s: float = 0.0
    ) -> None:
        self.db = db
        self.references = ReferenceCache(self._resolve, resolve_cache_s, stale_if_error_s)

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """``db.write()``, forgetting every resolved reference before and after it."""
        self._forget()
        try:
            with self.db.write() as conn:
                yield conn
        finally:
            self._forget()

    def _forget(self) -> None:
        self.references.forget()

    # -- reading -------------------------------------------------------------------------------
    @staticmethod
    def _records(conn: Connection, rows: list[Any]) -> list[dict[str, Any]]:
        """The records of model ``rows`` with their aliases, read in one query for all of them."""
        pointed: dict[tuple[str, int], list[str]] = {}
        names_read = sorted({row.name for row in rows})
        if names_read:
            for alias in conn.execute(select(aliases).where(aliases.c.name.in_(names_read))):
                pointed.setdefault((alias.name, alias.version), []).append(alias.alias)
        out = []
        for row in rows:
            record = json.loads(row.record)
            record["aliases"] = sorted(pointed.get((row.name, row.version), []))
            out.append(record)
        return out

    def get_record(self, model_id: str) -> dict[str, Any]:
        """The record of ``model_id`` (404 when unknown)."""
        if not is_model_id(model_id):
            raise NotFound(f"no model with id {model_id!r}")
        with self.db.read() as conn:
            row = conn.execute(select(models).where(models.c.model_id == model_id)).first()
            if row is None:
                raise NotFound(f"no model with id {model_id!r}")
            return self._records(conn, [row])[0]

    def list_records(
        self,
        name: str | None = None,
        limit: int = 50,
        offset: int = 0,
        model_type: str | None = None,
        alias: str | None = None,
        tag: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of records, newest first, filtered by name, type, alias and tag; and the total.

        ``alias`` keeps the versions an alias of that name points at; ``tag`` is ``key`` (any
        value) or ``key=value``.
        """
        where: list[Any] = []
        if name is not None:
            where.append(models.c.name == name)
        if model_type is not None:
            where.append(models.c.model_type == model_type)
        if alias is not None:
            where.append(
                select(aliases.c.alias)
                .where(aliases.c.name == models.c.name, aliases.c.version == models.c.version)
                .where(aliases.c.alias == alias)
                .correlate(models)
                .exists()
            )
        if tag is not None:
            key, sep, value = tag.partition("=")
            tagged = select(model_tags.c.model_id).where(
                model_tags.c.model_id == models.c.model_id, model_tags.c.key == key
            )
            if sep:
                tagged = tagged.where(model_tags.c.value == value)
            where.append(tagged.correlate(models).exists())
        with self.db.read() as conn:
            total = conn.execute(select(func.count()).select_from(models).where(*where)).scalar()
            rows = conn.execute(
                select(models)
                .where(*where)
                .order_by(models.c.created_at.desc(), models.c.version.desc())
                .limit(limit)
                .offset(offset)
            ).all()
            return self._records(conn, rows), int(total or 0)

    def name_summaries(self, limit: int = 100, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
        """One row per name that holds a model, the most recently trained first: its model type,
        how many versions it holds, the latest version and when it was stored, and its aliases;
        and how many such names there are. Two queries, whatever the number of models."""
        latest = func.max(models.c.created_at)
        with self.db.read() as conn:
            total = conn.execute(select(func.count(func.distinct(models.c.name)))).scalar()
            rows = conn.execute(
                select(
                    models.c.name,
                    func.min(models.c.model_type).label("model_type"),
                    func.count().label("versions"),
                    func.max(models.c.version).label("latest_version"),
                    latest.label("latest_at"),
                )
                .group_by(models.c.name)
                .order_by(latest.desc(), models.c.name)
                .limit(limit)
                .offset(offset)
            ).all()
            pointed: dict[str, dict[str, int]] = {row.name: {} for row in rows}
            if pointed:
                for alias in conn.execute(
                    select(aliases)
                    .where(aliases.c.name.in_(sorted(pointed)))
                    .order_by(aliases.c.alias)
                ):
                    pointed[alias.name][alias.alias] = int(alias.version)
        summaries = [
            {
                "name": row.name,
                "model_type": row.model_type,
                "versions": int(row.versions),
                "latest_version": int(row.latest_version),
                "latest_at": row.latest_at,
                "aliases": pointed[row.name],
            }
            for row in rows
        ]
        return summaries, int(total or 0)

    def resolve(self, ref: str, field: str = "model") -> str:
        """Model id of ``ref``: an id, ``name`` (latest version), ``name@alias`` or ``name:version``
        (kept for a while: ``reference_cache``)."""
        return self.references.resolve(ref, field)

    def resolved(self, ref: str) -> str | None:
        """The model id of ``ref`` if it is resolved in memory and still fresh, else ``None``."""
        return self.references.resolved(ref)

    def _resolve(self, ref: str, field: str) -> str:
        """``resolve`` from the database."""
        if is_model_id(ref):
            with self.db.read() as conn:
                found = conn.execute(
                    select(models.c.model_id).where(models.c.model_id == ref)
                ).scalar()
            if found is None:
                raise NotFound(f"no model with id {ref!r}")
            return ref
        name, alias, version = parse_reference(ref, field)
        with self.db.read() as conn:
            if alias is not None:
                query = select(models.c.model_id).join(
                    aliases,
                    and_(aliases.c.name == models.c.name, aliases.c.version == models.c.version),
                )
                query = query.where(and_(aliases.c.name == name, aliases.c.alias == alias))
            elif version is not None:
                query = select(models.c.model_id).where(
                    and_(models.c.name == name, models.c.version == version)
                )
            else:
                query = (
                    select(models.c.model_id)
                    .where(models.c.name == name)
                    .order_by(models.c.version.desc())
                    .limit(1)
                )
            model_id = conn.execute(query).scalar()
        if model_id is None:
            if alias is not None:
                raise NotFound(f"model {name!r} has no alias {alias!r}")
            if version is not None:
                raise NotFound(f"model {name!r} has no version {version}")
            raise NotFound(f"no model named {name!r}")
        return str(model_id)

    def existing(self, model_ids: list[str]) -> set[str]:
        """Which of ``model_ids`` have a row (the sweep keeps their artifacts)."""
        found: set[str] = set()
        with self.db.read() as conn:
            for start in range(0, len(model_ids), 500):
                chunk = model_ids[start : start + 500]
                rows = conn.execute(select(models.c.model_id).where(models.c.model_id.in_(chunk)))
                found.update(r[0] for r in rows)
        return found

    # -- writing -------------------------------------------------------------------------------
    @staticmethod
    def _ensure_name(conn: Connection, name: str) -> None:
        exists = conn.execute(select(names.c.name).where(names.c.name == name)).first()
        if exists is None:
            conn.execute(insert(names).values(name=name, next_version=1, created_at=now_iso()))

    @staticmethod
    def _claim_schema(
        conn: Connection, name: str, record: dict[str, Any], replace_schema: bool
    ) -> None:
        """Hold ``name`` to this record's type and features, or refuse a different one (409)."""
        signature = record_signature(record)
        row = conn.execute(
            select(names.c.model_type, names.c.signature).where(names.c.name == name)
        ).first()
        held = json.loads(row.signature) if row is not None and row.signature else None
        problem = schema_conflict(
            row.model_type if row else None, held, record["model_type"], signature
        )
        if problem and not replace_schema:
            raise NameSchemaConflict(
                f"model name {name!r} holds {problem}", [detail("name", problem)]
            )
        conn.execute(
            update(names)
            .where(names.c.name == name)
            .values(model_type=record["model_type"], signature=json.dumps(signature))
        )

    @staticmethod
    def _insert_tags(conn: Connection, model_id: str, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            conn.execute(insert(model_tags).values(model_id=model_id, key=key, value=str(value)))

    @staticmethod
    def _insert_model(conn: Connection, full: dict[str, Any], artifact_bytes: int) -> None:
        conn.execute(
            insert(models).values(
                model_id=full["model_id"],
                name=full["name"],
                version=full["version"],
                model_type=full["model_type"],
                created_at=full.get("created_at") or now_iso(),
                artifact_bytes=artifact_bytes,
                record=json.dumps(full, sort_keys=True),
            )
        )

    def add(
        self,
        model_id: str,
        record: dict[str, Any],
        artifact_bytes: int,
        *,
        replace_schema: bool = False,
        then: Callable[[Connection, dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Insert the row of a stored artifact, with the next version of its name; its record.

        ``then(conn, record)`` runs last in the same transaction (its writes commit with the row;
        what it raises rolls the row back). Idempotent: when ``model_id`` already has its row (a
        retry after a commit whose answer was lost), that row's record is returned.
        """
        name = check_name(record["name"])
        for attempt in range(5):
            try:
                with self._write() as conn:
                    row = conn.execute(select(models).where(models.c.model_id == model_id)).first()
                    if row is not None:
                        return self._records(conn, [row])[0]
                    self._ensure_name(conn, name)
                    self._claim_schema(conn, name, record, replace_schema)
                    version = conn.execute(
                        update(names)
                        .where(names.c.name == name)
                        .values(next_version=names.c.next_version + 1)
                        .returning(names.c.next_version)
                    ).scalar_one()
                    version -= 1
                    full = {**record, "model_id": model_id, "version": version}
                    full.pop("aliases", None)
                    self._insert_model(conn, full, artifact_bytes)
                    self._insert_tags(conn, model_id, full.get("tags") or {})
                    if then is not None:
                        then(conn, full)
                return {**full, "aliases": []}
            except IntegrityError:
                # two first trainings of a new name raced to create it: the loser retries
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def import_record(self, record: dict[str, Any], artifact_bytes: int) -> bool:
        """Insert a record that already has its id and version (the folder import); False if present."""
        name = check_name(record["name"])
        full = {k: v for k, v in record.items() if k != "aliases"}
        with self._write() as conn:
            if conn.execute(
                select(models.c.model_id).where(models.c.model_id == full["model_id"])
            ).first():
                return False
            self._ensure_name(conn, name)
            conn.execute(
                update(names)
                .where(and_(names.c.name == name, names.c.next_version <= full["version"]))
                .values(next_version=full["version"] + 1)
            )
            self._insert_model(conn, full, artifact_bytes)
        return True

    def replace_digest(self, model_id: str, digest: str, scheme: str) -> None:
        """Record a new signature of ``model_id``'s unchanged artifact (re-signing, see the store)."""
        with self.db.write() as conn:
            row = conn.execute(select(models.c.record).where(models.c.model_id == model_id)).first()
            if row is None:
                return
            record = {**json.loads(row.record), "artifact_sha256": digest}
            record["artifact_digest"] = scheme
            conn.execute(
                update(models)
                .where(models.c.model_id == model_id)
                .values(record=json.dumps(record, sort_keys=True))
            )

    def set_plot_data(self, model_id: str, values: dict[str, Any]) -> None:
        """Put each of ``values`` at ``plot_data[key]`` of ``model_id``'s record (plot data
        computed after the model was stored: the ν path, the comparison); nothing happens when
        the model is gone."""
        with self.db.write() as conn:
            row = conn.execute(select(models.c.record).where(models.c.model_id == model_id)).first()
            if row is None:
                return
            record = json.loads(row.record)
            record["plot_data"] = {**(record.get("plot_data") or {}), **values}
            conn.execute(
                update(models)
                .where(models.c.model_id == model_id)
                .values(record=json.dumps(record, sort_keys=True))
            )

    def reserve_versions(self, name: str, next_version: int) -> None:
        """Make the next version of ``name`` at least ``next_version`` (the folder import)."""
        with self._write() as conn:
            self._ensure_name(conn, check_name(name))
            conn.execute(
                update(names)
                .where(and_(names.c.name == name, names.c.next_version < next_version))
                .values(next_version=next_version)
            )

    def delete(self, model_id: str) -> dict[str, Any]:
        """Remove ``model_id``'s row and the aliases pointing at it; its last record (404 if none)."""
        record = self.get_record(model_id)
        with self._write() as conn:
            gone = conn.execute(delete(models).where(models.c.model_id == model_id)).rowcount
            conn.execute(
                delete(aliases).where(
                    and_(aliases.c.name == record["name"], aliases.c.version == record["version"])
                )
            )
        if not gone:
            raise NotFound(f"no model with id {model_id!r}")
        self.references.drop_answers_of(model_id)
        return record

    def aliases_of(self, name: str) -> dict[str, int]:
        """Every alias of ``name`` and its version (404 for an unknown name)."""
        check_name(name)
        with self.db.read() as conn:
            if conn.execute(select(names.c.name).where(names.c.name == name)).first() is None:
                raise NotFound(f"no model named {name!r}")
            rows = conn.execute(
                select(aliases.c.alias, aliases.c.version)
                .where(aliases.c.name == name)
                .order_by(aliases.c.alias)
            )
            return {r.alias: int(r.version) for r in rows}

    def delete_alias(self, name: str, alias: str) -> None:
        """Remove ``name@alias`` (404 when it does not exist); the version itself stays."""
        check_name(name)
        check_alias(alias)
        with self._write() as conn:
            gone = conn.execute(
                delete(aliases).where(and_(aliases.c.name == name, aliases.c.alias == alias))
            ).rowcount
        if not gone:
            raise NotFound(f"model {name!r} has no alias {alias!r}")

    def name_schema(self, name: str) -> tuple[str | None, dict[str, Any] | None]:
        """The model type and input signature ``name`` is held to (None, None when new)."""
        with self.db.read() as conn:
            row = conn.execute(
                select(names.c.model_type, names.c.signature).where(names.c.name == name)
            ).first()
        if row is None:
            return None, None
        return row.model_type, (json.loads(row.signature) if row.signature else None)

    def check_schema(self, name: str, model_type: str, signature: dict[str, Any]) -> None:
        """409 when ``name`` holds another model type or feature set (see ``schema_conflict``)."""
        problem = schema_conflict(*self.name_schema(name), model_type, signature)
        if problem:
            raise NameSchemaConflict(
                f"model name {name!r} holds {problem}; train under another name, or send "
                '"replace_schema": true to let this name change',
                [detail("name", problem)],
            )

    def set_alias(self, name: str, alias: str, version: int) -> dict[str, Any]:
        """Point ``name@alias`` at ``version`` (which must exist); that version's record."""
        check_name(name)
        check_alias(alias)
        model_id = self.resolve(f"{name}:{version}", field="version")
        with self._write() as conn:
            moved = conn.execute(
                update(aliases)
                .where(and_(aliases.c.name == name, aliases.c.alias == alias))
                .values(version=version, updated_at=now_iso())
            ).rowcount
            if not moved:
                conn.execute(
                    insert(aliases).values(
                        name=name, alias=alias, version=version, updated_at=now_iso()
                    )
                )
        return self.get_record(model_id)
