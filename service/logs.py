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


def skip_unused_record_fields() -> None:
    """Stop ``logging`` collecting the caller, thread and process of every record.

    The Logging HOWTO's "Optimization" settings: the JSON lines use none of these fields, and at
    the default level every request writes one access line (the caller lookup walks the stack).
    Records then carry ``funcName`` None, ``lineno`` 0 and ``thread`` None.
    """
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def configure_logging(level: str) -> None:
    """Send ``service.*`` records to stderr as JSON at ``level`` (once per process)."""
    skip_unused_record_fields()
    logger = logging.getLogger(SERVICE_LOGGER)
    logger.setLevel(level.upper())
    if not any(getattr(h, "_bsvm", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        handler._bsvm = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
