"""The access line's short way (``service.logs.log_direct``) and FastAPI's telemetry probe."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import random
import time
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.logs import (
    MAX_PENDING_LINES,
    JsonLineHandler,
    direct_handler,
    direct_line,
    json_line,
    log_direct,
    utc_ms,
    utc_ms_ns,
)
from service.settings import Settings

FIELDS = {"request_id": "ab12", "method": "POST", "path": '/p"q\\é', "status": 200, "x": None}


@pytest.fixture
def service_logger(monkeypatch):
    """A function that makes ``service`` log to one JsonLineHandler on a StringIO only, not
    propagated. Called inside the test: pytest adds its own capture handlers when the test's call
    starts, after fixtures, and any of them sends every record the long way."""
    logger = logging.getLogger("service")
    level = logger.level

    def install() -> tuple[logging.Logger, JsonLineHandler, io.StringIO]:
        stream = io.StringIO()
        handler = JsonLineHandler(stream, flush_after_s=0.05)
        monkeypatch.setattr(logger, "handlers", [handler])
        monkeypatch.setattr(logger, "propagate", False)
        logger.setLevel(logging.INFO)
        return logger, handler, stream

    yield install
    logger.setLevel(level)


def test_utc_ms_is_what_datetime_writes():
    rng = random.Random(0)
    times = [rng.uniform(0, 4e9) for _ in range(20_000)]
    times += [time.time() + rng.random() for _ in range(20_000)]
    # next to the millisecond and microsecond boundaries, where rounding decides
    times += [round(t, 3) + d for t in times[:5000] for d in (-5e-7, 5e-7, 4.9999e-4, -1e-9)]
    for t in times:
        assert utc_ms(t) == datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def test_utc_ms_ns_truncates_to_the_millisecond():
    rng = random.Random(1)
    for ns in [rng.randrange(0, 4 * 10**18) for _ in range(20_000)] + [1_795_471_223_999_999_999]:
        expected = datetime.fromtimestamp(ns // 1000 / 1e6, UTC).isoformat(timespec="milliseconds")
        assert utc_ms_ns(ns) == expected


def test_direct_line_is_json_line():
    ns = 1_795_471_223_806_999_400
    for fields in (FIELDS, {}, {"message": "clash"}, {"n": [1.5, float("nan")]}):
        line = direct_line(ns, "INFO", "service.access", "request", dict(fields))
        assert line == json_line(ns / 1e9, "INFO", "service.access", "request", fields)
        parsed = json.loads(line)
        assert parsed["ts"] == "2026-11-23T22:00:23.806+00:00"
    assert json.loads(direct_line(ns, "INFO", "a", "m", FIELDS))["path"] == FIELDS["path"]


def test_direct_handler_only_when_ours_is_the_only_one(service_logger, monkeypatch):
    logger, handler, _ = service_logger()
    access = logging.getLogger("service.access")
    assert direct_handler(access, logging.INFO) is handler
    assert direct_handler(access, logging.DEBUG) is None  # not enabled
    monkeypatch.setattr(logger, "propagate", True)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [logging.NullHandler()])
    assert direct_handler(access, logging.INFO) is None  # someone else listens
    monkeypatch.setattr(root, "handlers", [])
    assert direct_handler(access, logging.INFO) is handler
    monkeypatch.setattr(access, "filters", [lambda record: True])
    assert direct_handler(access, logging.INFO) is None  # a filter may change the record
    monkeypatch.setattr(access, "filters", [])
    handler.setLevel(logging.WARNING)
    assert direct_handler(access, logging.INFO) is None


def test_lines_are_buffered_then_flushed_by_the_loop(service_logger):
    _, handler, stream = service_logger()
    access = logging.getLogger("service.access")

    async def scenario() -> tuple[str, str]:
        log_direct(access, logging.INFO, "request", FIELDS)
        log_direct(access, logging.INFO, "request", FIELDS | {"status": 404})
        before = stream.getvalue()
        await asyncio.sleep(handler.flush_after_s * 3)
        return before, stream.getvalue()

    before, after = asyncio.run(scenario())
    assert before == ""
    lines = after.splitlines()
    assert [json.loads(line)["status"] for line in lines] == [200, 404]


def test_another_record_writes_the_buffer_first(service_logger):
    logger, _, stream = service_logger()
    access = logging.getLogger("service.access")

    async def scenario() -> None:
        log_direct(access, logging.INFO, "request", FIELDS)
        logger.warning("after the request")

    asyncio.run(scenario())
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["message"] == "request" and second["message"] == "after the request"


def test_a_full_buffer_and_no_loop_are_written_at_once(service_logger):
    _, handler, stream = service_logger()
    access = logging.getLogger("service.access")
    log_direct(access, logging.INFO, "request", FIELDS)  # no running loop: written now
    assert len(stream.getvalue().splitlines()) == 1
    for _ in range(MAX_PENDING_LINES):
        handler.add_line("{}")
    assert len(stream.getvalue().splitlines()) == 1 + MAX_PENDING_LINES
    handler.flush_after_s = 0.0
    handler.add_line('{"unbuffered":1}')
    assert stream.getvalue().splitlines()[-1] == '{"unbuffered":1}'


def test_the_app_writes_its_access_lines_the_short_way_and_at_shutdown(tmp_path, monkeypatch):
    app = create_app(Settings(data_dir=tmp_path, access_log_flush_ms=60_000))
    logger = logging.getLogger("service")
    (handler,) = [h for h in logger.handlers if isinstance(h, JsonLineHandler)]
    stream = io.StringIO()
    monkeypatch.setattr(handler, "stream", stream)
    monkeypatch.setattr(logger, "handlers", [handler])  # not pytest's capture handlers
    monkeypatch.setattr(logger, "propagate", False)
    assert handler.flush_after_s == 60.0
    with TestClient(app) as client:
        client.get("/health/live")
        client.get("/health/live")
        held = [json.loads(x) for x in stream.getvalue().splitlines()]
        assert not [x for x in held if x["logger"] == "service.access"]
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    access = [x for x in lines if x["logger"] == "service.access"]
    assert [x["status"] for x in access] == [200, 200]
    assert access[0]["request_id"] != access[1]["request_id"]


def test_telemetry_probe_is_skipped_only_when_no_provider_is_configured(tmp_path, monkeypatch):
    app = create_app(Settings(data_dir=tmp_path))
    assert app.telemetry_off is False  # before startup FastAPI decides per request
    with TestClient(app) as client:
        assert app.telemetry_off is True and app.state.telemetry is False
        assert client.get("/health/live").status_code == 200
    configured = create_app(Settings(data_dir=tmp_path))
    monkeypatch.setattr(configured._native_telemetry, "enabled", lambda: True)
    with TestClient(configured):
        assert configured.telemetry_off is False and configured.state.telemetry is True
