"""One structured (JSON) log line per request: request id, route template, status, latency."""

from __future__ import annotations

import json
import logging

from fastapi import APIRouter, Request
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.logs import JsonFormatter
from service.settings import Settings

probe = APIRouter()


@probe.get("/_probe/models/{model_id}")
def touch(model_id: str, request: Request) -> dict[str, str]:
    request.state.model_id = model_id
    return {"model_id": model_id}


def access_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "service.access"]


def test_one_line_per_request_with_its_fields(tmp_path, caplog):
    app = create_app(Settings(data_dir=tmp_path))
    app.include_router(probe)
    with TestClient(app) as client, caplog.at_level(logging.INFO, logger="service.access"):
        response = client.get("/_probe/models/m_0123", headers={"X-Request-ID": "req-42"})
        client.get("/missing")
    first, second = access_records(caplog)
    fields = first.fields
    assert fields["request_id"] == response.headers["X-Request-ID"] == "req-42"
    assert fields["route"] == "/_probe/models/{model_id}"
    assert fields["path"] == "/_probe/models/m_0123"
    assert fields["status"] == 200
    assert fields["model_id"] == "m_0123"
    assert fields["latency_ms"] >= 0
    assert second.fields["status"] == 404
    assert second.fields["model_id"] is None


def test_json_formatter_emits_one_parseable_object(tmp_path, caplog):
    app = create_app(Settings(data_dir=tmp_path))
    with TestClient(app) as client, caplog.at_level(logging.INFO, logger="service.access"):
        client.get("/health/live")
    (record,) = access_records(caplog)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["logger"] == "service.access"
    assert parsed["route"] == "/health/live"
    assert parsed["status"] == 200


def test_unexpected_error_is_logged_with_traceback(tmp_path, caplog):
    crash = APIRouter()

    @crash.get("/_probe/crash")
    def boom() -> None:
        raise ValueError("boom")

    app = create_app(Settings(data_dir=tmp_path))
    app.include_router(crash)
    with TestClient(app) as client, caplog.at_level(logging.INFO, logger="service.access"):
        response = client.get("/_probe/crash")
    assert response.status_code == 500
    errors = [r for r in access_records(caplog) if r.levelno == logging.ERROR]
    assert errors and errors[0].exc_info is not None
    assert response.headers["X-Request-ID"] in errors[0].getMessage()
    assert access_records(caplog)[-1].fields["status"] == 500


def test_json_formatter_writes_one_compact_utf8_object():
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    fields = {"model_id": None, "é": "ü", "n": [1.5, 2], "obj": Opaque(), 3: "non-str key"}
    record = logging.LogRecord("service.access", logging.INFO, __file__, 1, "request", (), None)
    record.fields = fields
    line = JsonFormatter().format(record)
    parsed = json.loads(line)
    assert list(parsed)[:4] == ["ts", "level", "logger", "message"]
    assert parsed["level"] == "INFO" and parsed["logger"] == "service.access"
    assert {k: parsed[k] for k in ("model_id", "é", "n", "obj", "3")} == {
        "model_id": None,
        "é": "ü",
        "n": [1.5, 2],
        "obj": "opaque",
        "3": "non-str key",
    }
    assert "\n" not in line and '"é":"ü"' in line


def test_records_skip_the_caller_lookup_but_keep_the_line(tmp_path, caplog):
    """The app turns off logging's caller, thread and process fields (unused by the JSON line)."""
    app = create_app(Settings(data_dir=tmp_path))
    with TestClient(app) as client, caplog.at_level(logging.INFO, logger="service.access"):
        client.get("/health/live")
    (record,) = access_records(caplog)
    assert record.lineno == 0 and record.thread is None and record.process is None
    parsed = json.loads(JsonFormatter().format(record))
    assert parsed["message"] == "request" and parsed["status"] == 200
