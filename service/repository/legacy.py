"""Import a model folder of the pre-database layout into the registry, once, losing nothing.

The old layout kept ``<model_dir>/names.json`` (next versions and aliases) and, per model,
``m_<hex>/record.json`` beside ``m_<hex>/model.joblib``. The artifacts are already where the file
artifact store looks for them, so only the rows are written: each record with its id and version,
each name's next version, each alias. Records of the old default, a plain SHA-256, are signed on
the way in — only when the artifact's bytes still match that SHA-256 — because the store trusts
only its own HMAC; a record whose bytes do not match keeps its digest and is refused on load. The import is idempotent and marked done in
``registry_meta``, so later starts skip the scan.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from pathlib import Path

from sqlalchemy import insert, select

from service.repository.registry import ModelRegistry, is_model_id, now_iso
from service.repository.signing import Signer
from service.repository.tables import settings_table

logger = logging.getLogger("service.repository.legacy")

RECORD = "record.json"
NAMES = "names.json"
ARTIFACT = "model.joblib"


def _marker(folder: Path) -> str:
    return "legacy_import:" + hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:40]


def _signed(record: dict, artifact: Path, signer: Signer) -> dict:
    """``record`` with its plain SHA-256 replaced by the HMAC, if the bytes still match it."""
    if record.get("artifact_digest", "sha256") != "sha256":
        return record
    data = artifact.read_bytes()
    if not hmac.compare_digest(hashlib.sha256(data).hexdigest(), record.get("artifact_sha256", "")):
        logger.error("old model %s does not match its sha256; imported, refused on load", artifact)
        return record
    return {**record, "artifact_sha256": signer.digest(data), "artifact_digest": signer.algorithm}


def import_folder(folder: Path, registry: ModelRegistry, signer: Signer) -> int:
    """Rows for every complete old-layout model under ``folder``; how many were added."""
    if not folder.is_dir():
        return 0
    key = _marker(folder)
    with registry.db.read() as conn:
        if conn.execute(select(settings_table.c.value).where(settings_table.c.key == key)).first():
            return 0
    added = 0
    for entry in sorted(folder.iterdir()):
        record_path, artifact = entry / RECORD, entry / ARTIFACT
        if not (is_model_id(entry.name) and record_path.is_file() and artifact.is_file()):
            continue
        try:
            record = json.loads(record_path.read_text())
        except (OSError, ValueError):
            logger.error("old model record %s is unreadable; not imported", record_path)
            continue
        if record.get("model_id") != entry.name:
            logger.error("old model record %s names another id; not imported", record_path)
            continue
        record = _signed(record, artifact, signer)
        added += registry.import_record(record, artifact.stat().st_size)
    names_path = folder / NAMES
    if names_path.is_file():
        try:
            names = json.loads(names_path.read_text())
        except (OSError, ValueError):
            logger.error("%s is unreadable; versions follow the imported records", names_path)
            names = {}
        for name, entry in names.items():
            registry.reserve_versions(name, int(entry.get("next_version", 1)))
            for alias, version in (entry.get("aliases") or {}).items():
                try:
                    registry.set_alias(name, alias, int(version))
                except Exception:
                    logger.warning("alias %s@%s -> %s not imported", name, alias, version)
    with registry.db.write() as conn:
        conn.execute(insert(settings_table).values(key=key, value=now_iso()))
    if added:
        logger.info("imported %d models from the model folder %s", added, folder)
    return added
