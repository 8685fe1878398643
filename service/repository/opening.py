"""Open the repository at start: migrate the database, import an old model folder, sweep debris."""

from __future__ import annotations

import logging

from service.repository.database import Database
from service.repository.legacy import import_folder
from service.repository.store import ModelStore
from service.settings import Settings

logger = logging.getLogger("service.repository")


def open_store(settings: Settings) -> ModelStore:
    """A ready ``ModelStore``: schema at head, old-layout models imported, crash debris swept."""
    db = Database(settings.registry_url)
    db.migrate()
    store = ModelStore(settings, db)
    if store.artifacts.local:
        import_folder(settings.models_path, store.registry, store.signer)
    removed = store.sweep(settings.sweep_grace_s)
    if removed:
        logger.warning("removed %d leftovers of interrupted saves: %s", len(removed), removed[:5])
    return store
