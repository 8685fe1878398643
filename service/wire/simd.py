"""A JSON body read by simdjson, its ``X`` copied straight into a float64 matrix.

orjson makes a Python float of every number of a body, then ``struct`` packs them into the
matrix. simdjson (pysimdjson) parses the document into its tape and copies the numbers of ``X``
out of it in one call (``Array.as_buffer``), with no Python object per number: 100 rows of 30
full-precision floats take 73 µs, against 113 µs for orjson's parse and 35 µs for the packing.

``read`` answers only where it is sure to read what ``json.loads`` reads, and returns ``None``
otherwise (the caller then reads the body with orjson, as before):

* the body must be a JSON object with no repeated key (simdjson keeps the first, json.loads the
  last) and no UTF-8 byte order mark (json.loads takes one, orjson does not);
* ``as_buffer`` takes JSON numbers only (an integer as the nearest double, as ``float()`` does;
  one past 64 bits fails the parse) and flattens nested arrays, so ``X`` must be a non-empty
  array of arrays of one length, the numbers must fill them exactly, and the body must hold
  exactly as many ``[`` as its arrays need: one for ``X``, one per row, and those of the other
  fields (whose strings hold no ``[``). A row that is an array of arrays (``[[1.0], 2.0]``) or an
  array where a number belongs would need one more, so none hides in a row.

``X`` with anything but numbers (booleans, which ``list[float]`` takes as 0 and 1, or strings,
null, objects) comes back as nested lists read from the same tape, for the caller to pack or
refuse as it does orjson's lists.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

try:
    import simdjson
except ImportError:  # installed without the service extra: orjson reads every body
    simdjson = None

BOM = b"\xef\xbb\xbf"
SMALL_BYTES = 2**13
"""Bodies up to this many bytes count their ``[`` by ``bytes.count``, longer ones by numpy."""
COUNT_BYTES = 2**20
"""Bytes numpy compares to ``[`` at a time (bounds the comparison's scratch array)."""
OPEN = ord("[")
REUSE_BYTES = 2**20
"""Bodies up to this size are parsed by the thread's own parser, kept from one body to the next."""
_local = threading.local()


def _brackets(value: Any) -> int | None:
    """How many ``[`` the JSON text of ``value`` holds, or None when a string holds one."""
    kind = type(value)
    if kind is str:
        return None if "[" in value else 0
    if kind is not list and kind is not dict:
        return 0
    total = 1 if kind is list else 0
    for item in (*value.keys(), *value.values()) if kind is dict else value:
        inner = _brackets(item)
        if inner is None:
            return None
        total += inner
    return total


def count_open(raw: bytes) -> int:
    """The number of ``[`` bytes in ``raw``: by ``bytes.count`` up to ``SMALL_BYTES`` (numpy's
    fixed cost is 4 µs), past it by numpy (0.25 ns a byte against 0.7)."""
    if len(raw) <= SMALL_BYTES:
        return raw.count(b"[")
    view = np.frombuffer(raw, dtype=np.uint8)
    return sum(
        int(np.count_nonzero(view[start : start + COUNT_BYTES] == OPEN))
        for start in range(0, view.size, COUNT_BYTES)
    )


def _rows(X: Any) -> tuple[int, int] | None:
    """(rows, width) when ``X`` is a non-empty array whose items all have one non-zero length.

    The lengths are taken by ``map(len, X)`` (no Python step per row); an item without one (a
    number) makes it None. An item with a length that is not an array (a string, an object)
    passes here and is caught after: ``as_buffer`` refuses it, and the rows then go to the
    caller as nested lists, whose packing refuses any row that is not a list.
    """
    if type(X) is not simdjson.Array or len(X) == 0:
        return None
    try:
        widths = set(map(len, X))
    except TypeError:
        return None
    if len(widths) != 1:
        return None
    width = widths.pop()
    return (len(X), width) if width > 0 else None


def _parser(size: int) -> Any:
    """This thread's parser for a body of ``size`` bytes up to ``REUSE_BYTES``, else a new one.

    A parser's buffers (its tape, about 10 bytes a byte of JSON) stay warm in the caches from one
    body to the next: a new parser's fresh buffers made a 62 KB parse 177 µs against 76 µs once
    the request's other work had been through the caches. Larger bodies get a parser of their
    own, so no thread keeps the buffers of the largest body it ever read.
    """
    if size > REUSE_BYTES:
        return simdjson.Parser()
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = simdjson.Parser(max_capacity=REUSE_BYTES)
    return parser


def read(raw: bytes) -> tuple[dict[str, Any], Any] | None:
    """(the other fields as Python values, ``X`` as a float64 matrix or as nested lists), or
    ``None`` when unsure (see the module docstring)."""
    if simdjson is None or raw[:3] == BOM:
        return None
    try:
        doc = _parser(len(raw)).parse(raw)
    except RuntimeError:  # a proxy of the last body still alive (none should be): start afresh
        _local.parser = None
        return None
    except (ValueError, TypeError):  # UnicodeDecodeError is a ValueError
        return None
    if type(doc) is not simdjson.Object:
        return None
    keys = list(doc.keys())
    if len(set(keys)) != len(keys) or "X" not in keys:
        return None
    fields: dict[str, Any] = {}
    for key in keys:
        if key != "X":
            value = doc[key]
            if type(value) is simdjson.Array:
                value = value.as_list()
            elif type(value) is simdjson.Object:
                value = value.as_dict()
            fields[key] = value
    expected = _brackets(fields)
    rows = doc["X"]
    shape = _rows(rows)
    if expected is None or shape is None:
        return None
    n, width = shape
    try:
        flat = rows.as_buffer(of_type="d")
    except TypeError:  # a boolean, a string, null or an object among the numbers
        return fields, rows.as_list()
    X = np.frombuffer(flat, dtype=np.float64)
    if X.size != n * width or count_open(raw) != expected + n + 1:
        return None
    return fields, X.reshape(n, width)


def number_array(text: bytes) -> np.ndarray | None:
    """The numbers of ``text``, a JSON array of numbers holding no other ``[``, as a float64
    vector (integers as ``float()`` reads them); None without simdjson or for any other text."""
    if simdjson is None:
        return None
    try:
        doc = _parser(len(text)).parse(text)
        if type(doc) is not simdjson.Array:
            return None
        count = len(doc)
        values = np.frombuffer(doc.as_buffer(of_type="d"), dtype=np.float64)
    except (ValueError, TypeError, RuntimeError):
        return None
    return values if values.size == count else None
