"""``python -m service`` / ``bsvm-serve``: uvicorn on ``BSVM_HOST``:``BSVM_PORT`` with ``BSVM_WORKERS``."""

from __future__ import annotations

from typing import Any

import uvicorn

from service.settings import Settings

APP_FACTORY = "service.api.app:create_app"
#: uvicorn's httptools protocol with its own 400 sent as the error envelope
#: (service.api.http_protocol), on the uvloop event loop.
HTTP_PROTOCOL = "service.api.http_protocol:EnvelopeHttpToolsProtocol"
EVENT_LOOP = "uvloop"


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


def main() -> None:
    """Serve the app built by ``create_app`` (which reads the same settings and sets up logs)."""
    uvicorn.run(APP_FACTORY, **uvicorn_options(Settings()))


if __name__ == "__main__":
    main()
