"""``python -m service`` / ``bsvm-serve``: uvicorn on ``BSVM_HOST``:``BSVM_PORT`` with ``BSVM_WORKERS``.

Before uvicorn starts, the repository is opened once (``BSVM_STARTUP_TIMEOUT_S`` of retries): a
server that cannot use its data folder or reach its database exits with status 1 and one log line
naming the cause, instead of answering 503 until someone notices.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import uvicorn

from service.logs import configure_logging, flush_service_logs
from service.repository.opening import StartupFailed, open_store_within
from service.settings import Settings

APP_FACTORY = "service.api.app:create_app"
#: uvicorn's httptools protocol with its own 400 sent as the error envelope
#: (service.api.http_protocol), on the uvloop event loop.
HTTP_PROTOCOL = "service.api.http_protocol:EnvelopeHttpToolsProtocol"
EVENT_LOOP = "uvloop"
#: The exit status of a server that could not open its repository at start.
STARTUP_FAILURE = 1

logger = logging.getLogger("service")


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments of ``uvicorn.run`` for ``settings`` (each worker builds its own app)."""
    return {
        "factory": True,
        "host": settings.host,
        "port": settings.port,
        "workers": settings.workers,
        "log_level": settings.log_level.lower(),
        "access_log": False,  # service.access writes one structured line per request instead
        "proxy_headers": False,
        "http": HTTP_PROTOCOL,
        "loop": EVENT_LOOP,
    }


def check_repository(settings: Settings) -> None:
    """Open the repository (migrations, sweep) and close it again, or exit with one log line."""
    configure_logging(settings.log_level, settings.access_log_flush_ms)
    try:
        store = open_store_within(settings, settings.startup_timeout_s)
    except StartupFailed as exc:
        logger.critical("%s", exc)
        flush_service_logs()
        sys.exit(STARTUP_FAILURE)
    store.db.dispose()


def main() -> None:
    """Serve the app built by ``create_app`` (which reads the same settings and sets up logs)."""
    settings = Settings()
    check_repository(settings)
    uvicorn.run(APP_FACTORY, **uvicorn_options(settings))


if __name__ == "__main__":
    main()
