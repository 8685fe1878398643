"""The wrk script builder of ``bench.wrk_generator`` (wrk itself is not needed)."""

from __future__ import annotations

from bench.load_generator import encode_post
from bench.wrk_generator import _lua_long_string, lua_script


def test_long_string_is_not_closed_by_its_text() -> None:
    assert _lua_long_string("a") == "[[a]]"
    assert _lua_long_string('{"X": [[1, 2]]}') == '[=[{"X": [[1, 2]]}]=]'
    assert _lua_long_string("]]]=]") == "[==[]]]=]]==]"


def test_script_rebuilds_each_request_without_host_or_length() -> None:
    raw = encode_post("127.0.0.1", 8000, "/predict", b'{"X": [[1.5]]}', "application/json")
    script = lua_script([raw, raw])
    assert script.count('wrk.format("POST", [[/predict]]') == 2
    assert "[ [[Content-Type]] ] = [[application/json]]" in script
    assert '[=[{"X": [[1.5]]}]=]' in script
    assert "Host" not in script and "Content-Length" not in script
    assert "turn = turn % #requests + 1" in script
