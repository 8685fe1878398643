"""Import a model folder of the pre-database layout into the registry when an operator asks.

The old layout kept ``<model_dir>/names.json`` (next versions and aliases) and, per model,
``m_<hex>/record.json`` beside ``m_<hex>/model.joblib``. The artifacts are already where the file
artifact store looks for them, so only the rows are written: each record with its id and version,
each name's next version, each alias.

The import never runs by itself (not at start, not because some marker is missing): an operator
runs ``bsvm-import-legacy`` (or ``python -m service.repository.legacy``) once, with the server's
settings. It signs nothing: every record keeps the digest it has, and loading checks it as it
checks any row. A record signed by this server's key before identities were bound
(``hmac-sha256``) loads once its bytes verify and its estimator matches the record, and is then
re-signed; a record of the old default, a plain SHA-256, is refused on load, since anyone who can
write the folder can write such a digest. Running it again adds nothing twice.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from service.repository.opening import open_store
from service.repository.references import is_model_id
from service.repository.registry import ModelRegistry
from service.repository.signing import BOUND, UNBOUND
from service.settings import Settings

logger = logging.getLogger("service.repository.legacy")

RECORD = "record.json"
NAMES = "names.json"
ARTIFACT = "model.joblib"


def import_folder(folder: Path, registry: ModelRegistry) -> int:
    """Rows for every complete old-layout model under ``folder``; how many were added."""
    if not folder.is_dir():
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
        if record.get("artifact_digest", "sha256") not in (BOUND, UNBOUND):
            logger.error(
                "old model %s carries no signature of a server key (a plain sha256); imported, "
                "refused on load: train it again",
                entry.name,
            )
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
    if added:
        logger.info("imported %d models from the model folder %s", added, folder)
    return added


def main(argv: list[str] | None = None) -> int:
    """``bsvm-import-legacy [FOLDER]``: import the old-layout folder (default ``BSVM_MODEL_DIR``)."""
    parser = argparse.ArgumentParser(
        prog="bsvm-import-legacy",
        description="Import a model folder of the pre-database layout (record.json, names.json) "
        "into the registry of the server's settings (BSVM_* variables). The folder must be the "
        "file artifact store's root. Signs nothing: models with a plain SHA-256 are listed but "
        "refused on load.",
    )
    parser.add_argument("folder", nargs="?", type=Path, help="default: BSVM_MODEL_DIR")
    args = parser.parse_args(argv)
    settings = Settings()
    folder = (args.folder or settings.models_path).resolve()
    store = open_store(settings)
    if not store.artifacts.local or Path(store.artifacts.root) != folder:
        print(
            f"{folder} is not the root of the artifact store ({store.artifacts.url}); "
            "the import writes rows for artifacts already in place",
            file=sys.stderr,
        )
        return 2
    added = import_folder(folder, store.registry)
    print(f"imported {added} models from {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
