"""Structured logging: every ``service.*`` log record as one JSON object per line.

Lines are encoded by orjson (UTF-8, compact; values it can't encode are written as ``str``).

The access line of every request takes a shorter way, ``log_direct``: when our handler is the
only place the record would go, the same line is written without building a ``LogRecord``, and
held in the handler's buffer for at most ``BSVM_ACCESS_LOG_FLUSH_MS`` (Envoy and nginx buffer
access logs the same way). Any other record written through the handler first writes out what is
buffered, so the lines keep their order; the buffer is also written out when it holds
``MAX_PENDING_LINES``, at shutdown (``flush_service_logs``) and at interpreter exit.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

SERVICE_LOGGER = "service"
MAX_PENDING_LINES = 256
"""Buffered direct lines written out at once, whatever the flush interval (about 64 KB)."""

_OPTIONS = orjson.OPT_NON_STR_KEYS
_RESERVED = frozenset({"ts", "level", "logger", "message"})
_SECOND: list[Any] = [None, ""]
"""The last whole second formatted by ``utc_ms`` and its text (one strftime per second)."""


def _utc_text(second: int, milli: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmm+00:00``, the date and time formatted once per second."""
    if second != _SECOND[0]:
        _SECOND[1] = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _SECOND[0] = second
    return f"{_SECOND[1]}.{milli:03d}+00:00"


def utc_ms(created: float) -> str:
    """``datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")``: microseconds
    rounded half-even, as ``fromtimestamp`` does, then truncated to milliseconds."""
    fraction, whole = math.modf(created)
    second, micro = divmod(int(whole) * 1_000_000 + round(fraction * 1_000_000), 1_000_000)
    return _utc_text(second, micro // 1000)


def utc_ms_ns(ns: int) -> str:
    """``utc_ms`` of a ``time.time_ns()`` reading, in integer arithmetic (milliseconds truncated)."""
    return _utc_text(*divmod(ns // 1_000_000, 1000))


def _encode(value: Any) -> str:
    return orjson.dumps(value, default=str, option=_OPTIONS).decode()


def _line(ts: str, level: str, logger: str, message: str, fields: Mapping[str, Any]) -> str:
    line = {"ts": ts, "level": level, "logger": logger, "message": message}
    line.update(fields)
    return _encode(line)


def json_line(
    created: float, level: str, logger: str, message: str, fields: Mapping[str, Any]
) -> str:
    """``{"ts", "level", "logger", "message", ...fields}`` as one line of JSON (no newline)."""
    return _line(utc_ms(created), level, logger, message, fields)


@functools.lru_cache(maxsize=32)
def _line_middle(level: str, logger: str, message: str) -> str:
    """``"level":…,"logger":…,"message":…`` as ``json_line`` writes it."""
    return _encode({"level": level, "logger": logger, "message": message})[1:-1]


def direct_line(now_ns: int, level: str, logger: str, message: str, fields: dict[str, Any]) -> str:
    """``json_line``'s text at ``time.time_ns()`` reading ``now_ns``, spliced from a cached middle
    and the encoded ``fields`` (for a fixed level, logger and message, as the access line has)."""
    if not fields or not _RESERVED.isdisjoint(fields):
        return _line(utc_ms_ns(now_ns), level, logger, message, fields)
    middle = _line_middle(level, logger, message)
    return f'{{"ts":"{utc_ms_ns(now_ns)}",{middle},{_encode(fields)[1:]}'


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", ...fields}``; ``extra={"fields": {...}}`` merges in."""

    def format(self, record: logging.LogRecord) -> str:
        fields = dict(getattr(record, "fields", {}))
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        return json_line(record.created, record.levelname, record.name, record.getMessage(), fields)


class JsonLineHandler(logging.StreamHandler):
    """A ``StreamHandler`` of JSON lines that can also take ready lines into a buffer."""

    def __init__(self, stream: Any = None, flush_after_s: float = 0.0) -> None:
        super().__init__(stream)
        self.setFormatter(JsonFormatter())
        self.flush_after_s = flush_after_s
        self._pending: list[str] = []
        self._bsvm = True

    def add_line(self, line: str) -> bool:
        """Buffer (or, with no flush interval, write) one ready line; True when it is the first
        line buffered since the last write, so the caller schedules a flush."""
        with self.lock:  # type: ignore[union-attr]
            if self.flush_after_s <= 0.0:
                self.stream.write(line + self.terminator)
                self.stream.flush()
                return False
            self._pending.append(line)
            if len(self._pending) >= MAX_PENDING_LINES:
                self._write_pending()
                return False
            return len(self._pending) == 1

    def _write_pending(self) -> None:
        if self._pending:
            self.stream.write(self.terminator.join(self._pending) + self.terminator)
            self._pending.clear()

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write_pending()
            super().flush()

    def emit(self, record: logging.LogRecord) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._write_pending()
            super().emit(record)


def direct_handler(logger: logging.Logger, level: int) -> JsonLineHandler | None:
    """Our JSON handler, when a record of ``level`` on ``logger`` would reach it and nothing else.

    None as soon as anything else could see or change the record: a filter on a logger or the
    handler, another handler anywhere up the propagation chain (pytest's ``caplog`` on the root,
    a user's logging config), a handler level above ``level``, or logging disabled for it.
    """
    if logger.disabled or not logger.isEnabledFor(level):
        return None
    found = None
    node: logging.Logger | None = logger
    while node is not None:
        if node.filters:
            return None
        for handler in node.handlers:
            if found is not None or not isinstance(handler, JsonLineHandler):
                return None
            if handler.filters or level < handler.level:
                return None
            found = handler
        if not node.propagate:
            break
        node = node.parent  # type: ignore[assignment]
    return found


def log_direct(logger: logging.Logger, level: int, message: str, fields: dict[str, Any]) -> None:
    """``logger.log(level, message, extra={"fields": fields})``, the same line handed straight to
    our handler when ``direct_handler`` finds it. The first line it buffers schedules the flush on
    the running event loop (with none running, the line is written at once)."""
    handler = direct_handler(logger, level)
    if handler is None:
        logger.log(level, message, extra={"fields": fields})
        return
    line = direct_line(time.time_ns(), logging.getLevelName(level), logger.name, message, fields)
    try:
        if handler.add_line(line):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                handler.flush()
            else:
                loop.call_later(handler.flush_after_s, handler.flush)
    except Exception:  # a broken stream: let logging report it as it would
        handler.handleError(logging.LogRecord(logger.name, level, "", 0, message, (), None, None))


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


def configure_logging(level: str, flush_ms: float = 0.0) -> None:
    """Send ``service.*`` records to stderr as JSON at ``level`` (one handler per process; a second
    call sets the level and the access-line flush interval ``flush_ms`` of that handler)."""
    skip_unused_record_fields()
    logger = logging.getLogger(SERVICE_LOGGER)
    logger.setLevel(level.upper())
    ours = [h for h in logger.handlers if isinstance(h, JsonLineHandler)]
    handler = ours[0] if ours else JsonLineHandler()
    handler.flush_after_s = max(float(flush_ms), 0.0) / 1000.0
    if not ours:
        logger.addHandler(handler)


def flush_service_logs() -> None:
    """Write out every buffered line of the service's handlers (at shutdown)."""
    for handler in logging.getLogger(SERVICE_LOGGER).handlers:
        handler.flush()


_REQUEST_FIELDS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "bsvm_request_fields", default=None
)
"""The fields of the access line of the request being served (the middleware binds them)."""


def bind_request_fields(fields: dict[str, Any]) -> contextvars.Token[dict[str, Any] | None]:
    """Make ``fields`` the access-line fields of this request (and of threads it runs work in)."""
    return _REQUEST_FIELDS.set(fields)


def unbind_request_fields(token: contextvars.Token[dict[str, Any] | None]) -> None:
    """Undo ``bind_request_fields``."""
    _REQUEST_FIELDS.reset(token)


def note_request(key: str, value: Any) -> None:
    """Set ``key`` on the access line of the request being served, if any (e.g. ``stale``)."""
    fields = _REQUEST_FIELDS.get()
    if fields is not None:
        fields[key] = value
