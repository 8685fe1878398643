"""The simdjson reader of ``POST /predict`` bodies: it reads a matrix of JSON floats straight from
simdjson's tape, exactly as ``json.loads`` would, and is unsure (None) of anything else, so that
orjson reads it instead; without simdjson, orjson reads every body as before."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.schemas.predict import PredictRequest
from service.wire import ours as fast_predict
from service.wire import simd as simd_body
from tests.service.wire.test_fast_predict import UNSURE, VALID

FLOAT = st.floats(allow_nan=False, allow_infinity=False)


def body(**fields) -> bytes:
    return json.dumps({"model": "iris", **fields}).encode()


def test_a_matrix_of_floats_comes_from_the_tape() -> None:
    X = np.random.default_rng(0).standard_normal((7, 5))
    fields, read = simd_body.read(
        body(X=X.tolist(), outputs=["label"], feature_names=list("abcde"))
    )
    assert type(read) is np.ndarray and read.flags.writeable
    np.testing.assert_array_equal(read, X, strict=True)
    assert fields == {"model": "iris", "outputs": ["label"], "feature_names": list("abcde")}


def test_integers_come_from_the_tape_and_booleans_as_lists(monkeypatch) -> None:
    monkeypatch.setattr(fast_predict, "SIMD_MIN_BYTES", 0)
    ints = [[1, 2.5], [0, -3], [2**63, -(2**63)], [2**64 - 1, 2**53 + 1]]
    _, read = simd_body.read(body(X=ints))
    assert type(read) is np.ndarray
    np.testing.assert_array_equal(read, np.array([[float(v) for v in row] for row in ints]))
    fields, read = simd_body.read(body(X=[[True, 2.5]]))
    assert read == [[True, 2.5]] and fields == {"model": "iris"}
    assert fast_predict.fast_body(body(X=[[True, 2.5]])).X.tolist() == [[1.0, 2.5]]


@pytest.mark.parametrize(
    "X",
    [
        [[1.0, [2.0]], [3.0, 4.0]],  # a list of one number in a row: its number fills the count
        [[[1.0, 2.0]], [[3.0, 4.0]]],  # 3-D, rows of one list each
        [[1.0, [2.0, 7.0]], 5.0, [3.0, 4.0]],  # a number for a row, balanced by a longer list
        [[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]],  # ragged, the total a multiple of the width
        [[1.0, {"a": 2.0}]],
        [[1.0, "2.0"]],
        [[1.0, None]],
        [[]],
        [],
    ],
)
def test_anything_but_a_matrix_of_numbers_is_not_read_as_one(X, monkeypatch) -> None:
    monkeypatch.setattr(fast_predict, "SIMD_MIN_BYTES", 0)
    read = simd_body.read(body(X=X))
    assert read is None or type(read[1]) is list  # lists: packed by the caller, who checks each
    assert fast_predict.fast_body(body(X=X)) is None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "nope", "model": "iris", "X": [[1.0, 2.0]]}',  # json.loads keeps the last
        b"\xef\xbb\xbf" + body(X=[[1.0, 2.0]]),
        body(model="a[b", X=[[1.0, 2.0]]),  # a [ in a string: the count cannot tell
        b'{"model": "a\\u005bb", "X": [[1.0, 2.0]]}',  # an escaped [ counts as none
        body(feature_names=["x[0]", "x[1]"], X=[[1.0, 2.0]]),
        b'{"model": "iris", "X": [[1.0, 2.0]], "other": {"k[": 1}}',
        body(X=[[1.0, 2.0]], outputs=[["label"]]),  # counted right, and refused by the caller
        b'{"model": "iris", "X": [[1.0, 1e400]]}',
        b'{"model": "iris\\ud800", "X": [[1.0, 2.0]]}',
        b"[[1.0, 2.0]]",
        b'{"model": "iris"}',
    ],
)
def test_the_reader_is_unsure_and_orjson_decides(raw: bytes, monkeypatch) -> None:
    monkeypatch.setattr(fast_predict, "SIMD_MIN_BYTES", 0)
    read = simd_body.read(raw)
    assert read is None or "outputs" in read[0]
    fast = fast_predict.fast_body(raw)
    if fast is not None:  # orjson's reading, checked against pydantic's
        model = PredictRequest.model_validate(json.loads(raw))
        np.testing.assert_array_equal(fast.X, np.asarray(model.X, dtype=np.float64))
        assert fast.model == model.model and fast.feature_names == model.feature_names


def test_the_brackets_are_counted_a_chunk_at_a_time(monkeypatch) -> None:
    raw = body(X=np.ones((40, 3)).tolist(), feature_names=["a", "b", "c"])
    whole = simd_body.count_open(raw)
    assert whole == raw.count(b"[") == 42
    monkeypatch.setattr(simd_body, "SMALL_BYTES", 0)
    assert simd_body.count_open(raw) == whole
    monkeypatch.setattr(simd_body, "COUNT_BYTES", 7)
    assert simd_body.count_open(raw) == whole
    assert simd_body.read(raw)[1].shape == (40, 3)


@pytest.fixture(params=["simdjson", "orjson"])
def reader(request, monkeypatch) -> str:
    """Both readers: as installed, and with simdjson absent (orjson reads every body)."""
    if request.param == "orjson":
        monkeypatch.setattr(simd_body, "simdjson", None)
    else:
        monkeypatch.setattr(fast_predict, "SIMD_MIN_BYTES", 0)  # small bodies too
    return request.param


@pytest.mark.parametrize("raw", VALID, ids=range(len(VALID)))
def test_every_valid_body_reads_alike_with_or_without_simdjson(reader, raw) -> None:
    fast = fast_predict.fast_body(raw)
    model = PredictRequest.model_validate(json.loads(raw))
    np.testing.assert_array_equal(fast.X, np.asarray(model.X, dtype=np.float64), strict=True)
    assert (fast.model, fast.outputs, fast.level, fast.feature_names) == (
        model.model,
        model.outputs,
        model.level,
        model.feature_names,
    )


@pytest.mark.parametrize("raw", UNSURE, ids=range(len(UNSURE)))
def test_every_unusual_body_is_left_to_pydantic_with_or_without_simdjson(reader, raw) -> None:
    assert fast_predict.fast_body(raw) is None


CELL = st.one_of(
    FLOAT,
    FLOAT.map(lambda v: [v]),
    st.lists(FLOAT, max_size=2),
    st.integers(-5, 5),
    st.none(),
)


@settings(max_examples=400, deadline=None)
@given(
    X=st.one_of(
        st.integers(1, 5).flatmap(
            lambda w: st.lists(st.lists(FLOAT, min_size=w, max_size=w), min_size=1, max_size=5)
        ),
        st.lists(st.lists(CELL, min_size=1, max_size=4), min_size=1, max_size=4),
        st.lists(st.one_of(CELL, st.lists(CELL, max_size=3)), max_size=4),
    ),
    names=st.one_of(st.none(), st.lists(st.sampled_from(["a", "b[", "c"]), max_size=3)),
)
def test_whatever_the_reader_takes_json_loads_reads_the_same(X, names) -> None:
    raw = body(X=X, feature_names=names)
    read = simd_body.read(raw)
    floats = all(type(v) is float for row in X if type(row) is list for v in row)
    if read is not None and type(read[1]) is np.ndarray:
        expected = np.asarray(json.loads(raw)["X"], dtype=np.float64)
        np.testing.assert_array_equal(read[1], expected, strict=True)
        assert np.array_equal(np.signbit(read[1]), np.signbit(expected))
        assert read[0] == {"model": "iris", "feature_names": names}
    rectangular = len({len(row) for row in X if type(row) is list}) == 1
    plain = all(type(row) is list for row in X) and rectangular and floats and X and X[0]
    if plain and not (names and any("[" in n for n in names)):  # a float matrix: read from the tape
        assert read is not None and type(read[1]) is np.ndarray


def test_small_bodies_are_read_by_orjson_and_large_ones_by_simdjson(monkeypatch) -> None:
    calls = []
    real = simd_body.read
    monkeypatch.setattr(simd_body, "read", lambda raw: calls.append(len(raw)) or real(raw))
    small = body(X=[[0.5] * 4])
    large = body(X=[[0.123456789] * 30] * 20)
    assert len(small) < fast_predict.SIMD_MIN_BYTES <= len(large)
    assert fast_predict.fast_body(small).X.shape == (1, 4) and calls == []
    assert fast_predict.fast_body(large).X.shape == (20, 30) and calls == [len(large)]


def test_a_thread_keeps_its_parser_for_bodies_up_to_the_reuse_size(monkeypatch) -> None:
    first = body(X=[[0.25, 0.5]] * 3)
    assert simd_body.read(first)[1].shape == (3, 2)
    parser = simd_body._local.parser
    assert simd_body.read(body(X=[[1.5]] * 9))[1].shape == (9, 1)
    assert simd_body._local.parser is parser
    monkeypatch.setattr(simd_body, "REUSE_BYTES", len(first) - 1)
    assert simd_body.read(first)[1].shape == (3, 2)  # a parser of its own
    assert simd_body._local.parser is parser


def test_a_proxy_left_alive_costs_one_body_and_not_the_parser() -> None:
    simd_body.read(body(X=[[0.5]]))
    held = simd_body._local.parser.parse(b"[[1.0]]")  # someone else's proxy on the tape
    assert simd_body.read(body(X=[[0.5]])) is None  # left to orjson
    del held
    assert simd_body.read(body(X=[[0.5]]))[1].tolist() == [[0.5]]


def test_a_flat_array_of_numbers_comes_from_the_tape() -> None:
    values = simd_body.number_array(
        b"[1, -0.0, 2.5e-3, 18446744073709551615, -9223372036854775808]"
    )
    np.testing.assert_array_equal(values, [1.0, -0.0, 2.5e-3, 2.0**64, -(2.0**63)], strict=True)
    assert np.signbit(values[1])
    for text in (b"[1, 2", b"{}", b"[true]", b'["1"]', b"[1, 2] 3", b"[]x", b"[[1, 2], 3]"):
        assert simd_body.number_array(text) is None, text
    assert simd_body.number_array(b"[123456789012345678901234567890]") is None  # orjson's


@pytest.mark.parametrize("name", ["plain", "exponents", "long integer", "17 digits", "overflowing"])
def test_csv_blocks_read_alike_by_simdjson_and_orjson(monkeypatch, name) -> None:
    from service.wire.csv_matrix import numeric_matrix
    from tests.service.wire.test_csv_matrix import BODIES

    raw = BODIES[name].encode()
    fast = numeric_matrix(raw, lambda header: frozenset())
    monkeypatch.setattr(simd_body, "simdjson", None)
    slow = numeric_matrix(raw, lambda header: frozenset())
    assert (fast is None) == (slow is None)
    if fast is not None:
        assert fast[0] == slow[0]
        np.testing.assert_array_equal(fast[1], slow[1], strict=True)
        assert np.array_equal(np.signbit(fast[1]), np.signbit(slow[1]))
