"""Against a real uvicorn: a body shorter than its Content-Length is cut with 408, and requests the
HTTP parser refuses (before the app sees them) still answer 400 as the envelope."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time

import pytest

from service.__main__ import HTTP_PROTOCOL, uvicorn_options
from service.api.http_protocol import MAX_HEAD_BYTES
from service.settings import Settings
from tests.service.live_server import live_server

pytestmark = pytest.mark.slow

#: The server's body timeout in these tests; the client gives up well after it.
BODY_TIMEOUT_S = 1.0
CLIENT_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("hostile-live")
    with live_server(root, root, body_timeout_s=str(BODY_TIMEOUT_S), log_level="warning") as url:
        yield url


def exchange(base_url: str, raw: bytes) -> tuple[float, int, dict[str, str], bytes]:
    """Send ``raw`` on a fresh socket, read until the server closes; elapsed s, status, headers, body."""
    host, port = base_url.removeprefix("http://").split(":")
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=CLIENT_TIMEOUT_S) as sock:
        sock.sendall(raw)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    elapsed = time.monotonic() - started
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    return elapsed, int(status_line.split()[1]), headers, body


def envelope_of(headers: dict[str, str], body: bytes) -> dict:
    """The JSON envelope, with the request id echoed in the header."""
    assert headers["content-type"] == "application/json"
    parsed = json.loads(body)
    assert set(parsed) == {"error", "code", "details", "request_id"}
    assert parsed["request_id"] == headers["x-request-id"]
    return parsed


def test_body_shorter_than_its_content_length_is_408(server):
    raw = (
        b"POST /predict HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n" + b'{"model": '
    )
    elapsed, status, headers, body = exchange(server, raw)
    assert status == 408
    assert elapsed < CLIENT_TIMEOUT_S  # answered by the server's timeout, not our socket's
    parsed = envelope_of(headers, body)
    assert parsed["code"] == "REQUEST_TIMEOUT"
    assert [d["field"] for d in parsed["details"]] == ["body"]
    assert headers["connection"] == "close"


@pytest.mark.parametrize(
    "head",
    [
        b"Content-Length: -5\r\n",
        b"Content-Length: abc\r\n",
        b"Content-Length: 5\r\nContent-Length: 6\r\n",
        b"Bad Header\r\n",
    ],
    ids=["negative-length", "word-length", "two-lengths", "header-without-colon"],
)
def test_request_the_parser_refuses_is_a_400_envelope(server, head):
    raw = b"POST /predict HTTP/1.1\r\nHost: test\r\n" + head + b"\r\n"
    _, status, headers, body = exchange(server, raw)
    assert status == 400
    parsed = envelope_of(headers, body)
    assert parsed["code"] == "BAD_REQUEST"
    assert [d["field"] for d in parsed["details"]] == ["request"]


@pytest.mark.parametrize(
    "raw",
    [
        b"POST /predict HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        b"POST /predict HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET /health/live HTTP/1.1\r\nHost: t\r\nX-Big: "
        + b"a" * (MAX_HEAD_BYTES + 1)
        + b"\r\n\r\n",
        b"GET /health/live HTTP/1.1\r\nHost: t\r\n" + b"X-Many: a\r\n" * 2000 + b"\r\n",
        b"GET /a b HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /health/live HTTP/9.9\r\nHost: t\r\n\r\n",
    ],
    ids=[
        "bad-chunk",
        "length-and-chunked",
        "huge-header",
        "many-headers",
        "space-in-target",
        "version",
    ],
)
def test_more_requests_the_parser_refuses_are_400_envelopes(server, raw):
    _, status, headers, body = exchange(server, raw)
    assert status == 400
    assert envelope_of(headers, body)["code"] == "BAD_REQUEST"
    assert headers["connection"] == "close"


def test_a_head_that_keeps_arriving_is_cut_at_the_cap(server):
    host, port = server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=CLIENT_TIMEOUT_S) as sock:
        sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: t\r\nX-Big: ")
        try:
            for _ in range(64):  # up to 256 KiB, a piece at a time, until the server answers
                if select.select([sock], [], [], 0.02)[0]:
                    break
                sock.sendall(b"a" * 4096)
        except OSError:
            pass  # the server has closed the connection
        received = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                received += chunk
    assert received.startswith(b"HTTP/1.1 400 ")
    assert b'"code":"BAD_REQUEST"' in received


def test_a_head_under_the_cap_is_served(server):
    big = b"X-Big: " + b"a" * (MAX_HEAD_BYTES // 2) + b"\r\n"
    raw = b"GET /health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + big + b"\r\n"
    assert exchange(server, raw)[1] == 200


def test_garbage_request_line_is_a_400_envelope(server):
    _, status, headers, body = exchange(server, b"NOT HTTP AT ALL\r\n\r\n")
    assert status == 400
    assert envelope_of(headers, body)["code"] == "BAD_REQUEST"


def test_the_server_runs_the_enveloping_protocol():
    assert uvicorn_options(Settings())["http"] == HTTP_PROTOCOL
