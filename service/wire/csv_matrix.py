"""The fast path of a numeric CSV body: header and float64 matrix straight from the bytes.

A plain CSV — no quotes, lines ended by ``\\n`` or ``\\r\\n``, every data line with as many cells
as the header — skips ``csv.reader`` and the Python list per row. The body is read in blocks of
about ``BLOCK_BYTES`` cut at line ends. In each, when every cell is made of JSON-number bytes
(digits, ``.``, ``-``, ``+``, ``e``, spaces) and every line has as many cells as the header (both
checked by one ``bytes.translate``: what it leaves must be the commas and line ends of such
lines), the block is read as one flat JSON array (correctly rounded, like ``float``): by
simdjson straight into the matrix, or else by orjson (~3x numpy's ``loadtxt``) with ``struct``
packing the values. When some columns are not
to be read, or a cell is not a JSON number, numpy counts the commas of every line and its C
``loadtxt`` reads the lines. Anything else (quotes, bare ``\\r``, ragged
lines, a cell that is not a number, no data line) returns ``None``, and the caller takes the
general path (``csv.reader`` and ``float`` per cell), which gives the exact error. The one
difference: a cell ``-0`` (an integer) is read as ``0.0``, not ``-0.0``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

import numpy as np
import orjson

from service.wire import simd

BLOCK_BYTES = 2**19
"""Bytes of the body read at a time: simdjson's reused parser takes up to 1 MB, and orjson's
float objects in flight stay small."""
#: Bytes of cells that are JSON numbers (and spaces around them).
_NUMBER_BYTES = b"0123456789.eE+- "
_BOM = b"\xef\xbb\xbf"


def plain_body(raw: bytes) -> tuple[list[str], bytes] | None:
    """Header names and data lines (``\\n`` between them; blank lines may remain) of a plain CSV.

    Only one-byte searches run over the whole body (``memchr``: a two-byte ``in`` costs 15 times
    as much on a body of short lines); blank lines are dropped block by block, where there are any.
    """
    data = raw[len(_BOM) :] if raw.startswith(_BOM) else raw
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
        if b"\r" in data:
            return None
    if b'"' in data:
        return None
    data = data.strip(b"\n")
    end = data.find(b"\n")
    if end < 0:
        return None
    try:
        header = data[:end].decode("utf-8").split(",")
    except UnicodeDecodeError:
        return None
    return [name.strip() for name in header], data[end + 1 :]


def has_blank_lines(block: bytes) -> bool:
    """True when ``block`` (a cut of data lines) holds an empty line, at its ends or inside."""
    return block.startswith(b"\n") or block.endswith(b"\n") or b"\n\n" in block


def without_blank_lines(block: bytes) -> bytes:
    """``block`` with its empty lines left out."""
    return b"\n".join(filter(None, block.split(b"\n")))


def blocks(data: bytes, block_bytes: int) -> Iterator[bytes]:
    """``data`` cut at line ends into pieces of about ``block_bytes``."""
    start = 0
    while start < len(data):
        stop = data.find(b"\n", start + block_bytes)
        stop = len(data) if stop < 0 else stop
        yield data[start:stop]
        start = stop + 1


def even(block: bytes, commas: int) -> int | None:
    """The number of lines of ``block`` when each holds ``commas`` commas, else ``None``.

    The separators (commas and line ends) must come as ``commas`` commas, a line end, and so on.
    """
    chars = np.frombuffer(block, dtype=np.uint8)
    line_end = chars == ord("\n")
    kinds = line_end[np.flatnonzero(line_end | (chars == ord(",")))]
    width = commas + 1
    if (len(kinds) + 1) % width:
        return None
    expected = np.zeros(len(kinds), dtype=bool)
    expected[width - 1 :: width] = True
    return (len(kinds) + 1) // width if np.array_equal(kinds, expected) else None


def json_lines(block: bytes, width: int) -> int | None:
    """The number of lines of ``block`` when each is ``width`` cells of JSON-number bytes.

    With those bytes deleted (one ``translate``), what is left must be the separators exactly:
    ``width - 1`` commas, a line end, and so on (``even``'s check and the byte check in one pass).
    """
    separators = block.translate(None, _NUMBER_BYTES)
    lines = separators.count(b"\n") + 1
    line = b"," * (width - 1)
    return lines if separators == (line + b"\n") * (lines - 1) + line else None


def json_numbers(block: bytes, lines: int, width: int) -> np.ndarray | None:
    """The ``lines`` x ``width`` cells of ``block`` (``json_lines``) when every one is a number.

    simdjson copies them from its tape (``simd.number_array``; ``json_lines`` left no ``[``
    in the block); where it cannot (an integer past 64 bits, say), orjson reads them.
    """
    text = b"[" + block.replace(b"\n", b",") + b"]"
    values = simd.number_array(text)
    if values is not None and values.size == lines * width:
        return values.reshape(lines, width)
    out = np.empty((lines, width))
    try:
        values = orjson.loads(text)
        # orjson gives ints and floats here; struct packs them as float() would, a third of the
        # time of np.array over the list, and refuses any other count of values
        struct.Struct(f"{lines * width}d").pack_into(out, 0, *values)
    except (orjson.JSONDecodeError, TypeError, struct.error, OverflowError):
        return None
    return out


def loadtxt_numbers(block: bytes, columns: list[int]) -> np.ndarray | None:
    """The ``columns`` of the lines of ``block`` by numpy's ``loadtxt`` (``None`` when it fails)."""
    try:
        lines = block.decode("utf-8").split("\n")
        return np.loadtxt(
            lines, dtype=np.float64, delimiter=",", comments=None, usecols=columns, ndmin=2
        )
    except (UnicodeDecodeError, ValueError):
        return None


def numeric_matrix(
    raw: bytes, unused: Callable[[list[str]], frozenset[int]]
) -> tuple[list[str], np.ndarray] | None:
    """Header and float64 rows of a plain numeric CSV body; ``None`` for the general path.

    ``unused(header)`` names the columns not to parse (they hold 0.0, as on the general path).
    """
    plain = plain_body(raw)
    if plain is None:
        return None
    header, data = plain
    skip = unused(header)
    columns = [j for j in range(len(header)) if j not in skip]
    if not columns:
        return None
    parts = []
    for block in blocks(data, BLOCK_BYTES):
        values = block_values(block, len(header), columns)
        if values is None and has_blank_lines(block):
            block = without_blank_lines(block)
            if not block:
                continue
            values = block_values(block, len(header), columns)
        if values is None:
            return None
        parts.append(values)
    if not parts:
        return None
    return header, parts[0] if len(parts) == 1 else np.concatenate(parts)


def block_values(block: bytes, width: int, columns: list[int]) -> np.ndarray | None:
    """The lines of ``block`` as ``width`` floats each, 0.0 outside ``columns``; else None."""
    lines = json_lines(block, width) if len(columns) == width else None
    if lines is not None:
        values = json_numbers(block, lines, width)
        if values is not None:
            return values
    if even(block, width - 1) is None:
        return None
    values = loadtxt_numbers(block, columns)
    if values is None:
        return None
    if len(columns) < width:
        full = np.zeros((values.shape[0], width))
        full[:, columns] = values
        values = full
    return values
