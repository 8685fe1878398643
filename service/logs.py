"""Structured logging: every ``service.*`` log record as one JSON object per line."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

SERVICE_LOGGER = "service"
_ENCODER = json.JSONEncoder(default=str)
"""``json.dumps(value, default=str)`` without building an encoder for every line."""


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", ...fields}``; ``extra={"fields": {...}}`` merges in."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "fields", {}))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return _ENCODER.encode(line)


def configure_logging(level: str) -> None:
    """Send ``service.*`` records to stderr as JSON at ``level`` (once per process)."""
    logger = logging.getLogger(SERVICE_LOGGER)
    logger.setLevel(level.upper())
    if not any(getattr(h, "_bsvm", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        handler._bsvm = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
