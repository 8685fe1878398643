"""The fast path of numeric CSV bodies gives what the general path (csv.reader, float) gives."""

from __future__ import annotations

import numpy as np
import pytest
from starlette.datastructures import QueryParams

from service.errors import ApiError
from service.wire import csv_bodies, csv_matrix
from service.wire.csv_matrix import numeric_matrix

QUERY = QueryParams({"model": "m"})

BODIES = {
    "plain": "a,b,c\n1,2.5,-3\n4,5,6\n",
    "exponents": "a,b\n1e5,-2.5E-3\n1e-300,7e+2\n",
    "float spellings": "a,b,c\n1.,.5,+1\n007,-0.0,1_0\n",
    "spaces": "a,b\n 1, 2\n3 ,4\n",
    "crlf": "a,b\r\n1,2\r\n3,4\r\n",
    "bare cr": "a,b\r1,2\r3,4\r",
    "blank lines": "a,b\n\n1,2\n\n3,4\n\n",
    "bom": "\ufeffa,b\n1,2\n",
    "one column": "a\n1\n2\n3\n",
    "quoted": 'a,b\n"1",2\n3,"4"\n',
    "quoted header": '"a,x",b\n1,2\n',
    "nan and inf": "a,b\nnan,1\ninf,-inf\n",
    "overflowing": "a,b\n1e400,1\n2,3\n",
    "long integer": "a,b\n123456789012345678901234567890,1\n9007199254740993,2\n",
    "17 digits": "a,b\n0.30000000000000004,0.1\n2.2250738585072014e-308,5e-324\n",
    "ragged": "a,b\n1,2\n3\n",
    "ragged, same total": "a,b,c\n1,2,3,4\n5,6\n",
    "empty cell": "a,b\n1,\n3,4\n",
    "not a number": "a,b\n1,x\n3,4\n",
    "json words": "a,b\ntrue,1\nnull,2\n",
    "comment mark": "a,b\n#1,2\n3,4\n",
    "brackets": "a,b\n[1],2\n3,4\n",
    "no rows": "a,b\n",
    "duplicate columns": "a,a\n1,2\n",
    "non-ascii cell": "a,b\n1,２\n3,4\n",
    "whitespace line": "a\n1\n \n2\n",
}


def general(raw: bytes) -> dict:
    """``decode_predict`` with the fast path switched off."""
    original = csv_bodies.numeric_matrix
    csv_bodies.numeric_matrix = lambda raw, unused: None
    try:
        return csv_bodies.decode_predict(raw, QUERY)
    finally:
        csv_bodies.numeric_matrix = original


def outcome(convert, raw: bytes):
    """(header, float64 X) of a conversion, or (status, code, details) of its error."""
    try:
        payload = convert(raw)
    except ApiError as exc:
        return ("error", exc.status_code, exc.code, [(d.field, d.problem) for d in exc.details])
    return payload.feature_names, np.asarray(payload.X, dtype=np.float64)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_fast_and_general_paths_agree(name):
    raw = BODIES[name].encode()
    fast = outcome(lambda r: csv_bodies.decode_predict(r, QUERY), raw)
    slow = outcome(general, raw)
    if slow[0] == "error":
        assert fast == slow
    else:
        assert fast[0] == slow[0]
        np.testing.assert_array_equal(fast[1], slow[1])  # NaN equal to NaN, values to the bit
        assert np.array_equal(np.signbit(fast[1]), np.signbit(slow[1]))


def test_random_numbers_are_read_to_the_bit():
    rng = np.random.default_rng(0)
    values = rng.standard_normal((300, 7)) * 10.0 ** rng.integers(-30, 30, (300, 7))
    lines = ["a,b,c,d,e,f,g"]
    for i, row in enumerate(values.tolist()):
        fmt = "{!r}" if i % 2 else "{:.6g}"
        lines.append(",".join(fmt.format(v) for v in row))
    raw = ("\n".join(lines) + "\n").encode()
    fast = numeric_matrix(raw, lambda header: frozenset())
    assert fast is not None
    np.testing.assert_array_equal(fast[1], np.asarray(general(raw).X))


@pytest.mark.parametrize(
    ("name", "taken"),
    [("plain", True), ("exponents", True), ("crlf", True), ("quoted", False), ("ragged", False)],
)
def test_plain_bodies_take_the_fast_path(name, taken):
    found = numeric_matrix(BODIES[name].encode(), lambda header: frozenset())
    assert (found is not None) == taken


def test_unused_columns_are_not_parsed_and_hold_zero():
    found = numeric_matrix(b"a,label,b\n1,cat,2\n3,dog,4\n", lambda header: frozenset({1}))
    assert found is not None
    assert found[0] == ["a", "label", "b"]
    np.testing.assert_array_equal(found[1], [[1.0, 0.0, 2.0], [3.0, 0.0, 4.0]])


def test_bodies_read_in_several_blocks_are_whole(monkeypatch):
    monkeypatch.setattr(csv_matrix, "BLOCK_BYTES", 50)
    rows = np.arange(100 * 3, dtype=float).reshape(100, 3) / 7
    raw = "a,b,c\n" + "\n".join(",".join(map(repr, row)) for row in rows.tolist()) + "\n"
    for unused in (frozenset(), frozenset({1})):
        found = numeric_matrix(raw.encode(), lambda header, unused=unused: unused)
        assert found is not None
        want = rows.copy()
        want[:, list(unused)] = 0.0
        np.testing.assert_array_equal(found[1], want)


@pytest.mark.parametrize("width", [1, 3])
def test_blank_lines_anywhere_are_left_out_on_the_fast_path(monkeypatch, width):
    monkeypatch.setattr(csv_matrix, "BLOCK_BYTES", 20)  # cuts fall next to blank lines too
    rng = np.random.default_rng(width)
    rows = rng.standard_normal((60, width)).round(3)
    lines = [",".join("abc"[:width])]
    for row in rows.tolist():
        lines += [""] * int(rng.integers(0, 3)) + [",".join(map(repr, row))]
    raw = ("\n".join(lines) + "\n\n\n").encode()
    found = numeric_matrix(raw, lambda header: frozenset())
    assert found is not None
    np.testing.assert_array_equal(found[1], rows)
    np.testing.assert_array_equal(found[1], np.asarray(general(raw).X))


@pytest.mark.parametrize("name", sorted(BODIES))
def test_fast_and_general_paths_agree_block_by_block(monkeypatch, name):
    monkeypatch.setattr(csv_matrix, "BLOCK_BYTES", 3)
    test_fast_and_general_paths_agree(name)


def test_the_matrix_is_writable():
    found = numeric_matrix(BODIES["plain"].encode(), lambda header: frozenset())
    assert found is not None and found[1].flags.writeable and found[1].dtype == np.float64
