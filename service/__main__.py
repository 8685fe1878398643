"""``python -m service`` / ``bsvm-serve``: uvicorn on ``BSVM_HOST``:``BSVM_PORT``, one worker."""

from __future__ import annotations

import uvicorn

from service.settings import Settings


def main() -> None:
    """Serve the app built by ``create_app`` (which reads the same settings and sets up logs)."""
    settings = Settings()
    uvicorn.run(
        "service.api.app:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,  # service.access writes one structured line per request instead
        proxy_headers=False,
    )


if __name__ == "__main__":
    main()
