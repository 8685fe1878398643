"""Open the repository at start: migrate the database, sweep debris.

An old model folder is imported only when an operator runs ``bsvm-import-legacy``
(``service.repository.legacy``), never at start.
"""

from __future__ import annotations

import logging

from service.repository.database import Database
from service.repository.store import ModelStore
from service.settings import Settings

logger = logging.getLogger("service.repository")


def open_store(settings: Settings) -> ModelStore:
    """A ready ``ModelStore``: schema at head, crash debris swept."""
    db = Database(settings.registry_url)
    db.migrate()
    store = ModelStore(settings, db)
    removed = store.sweep(settings.sweep_grace_s)
    if removed:
        logger.warning("removed %d leftovers of interrupted saves: %s", len(removed), removed[:5])
    return store
