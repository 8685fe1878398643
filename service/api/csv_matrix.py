"""The fast path of a numeric CSV body: header and float64 matrix straight from the text.

A plain CSV — no quotes, lines ended by ``\\n`` or ``\\r\\n``, every data line with as many cells
as the header — skips ``csv.reader`` and the Python list per row. When every cell is a JSON
number (digits, ``.``, ``-``, ``e``, spaces: checked by one ``bytes.translate``) the rows are read
as one flat JSON array by orjson (correctly rounded, like ``float``; ~3x numpy's ``loadtxt``);
otherwise, or when some columns are not to be read, numpy's C ``loadtxt``. Anything else (quotes,
bare ``\\r``, ragged lines, a cell that is not a number, no data line) returns ``None``, and the
caller takes the general path (``csv.reader`` and ``float`` per cell), which gives the exact error.
The one difference: a cell ``-0`` (an integer) is read as ``0.0``, not ``-0.0``.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat

import numpy as np
import orjson

#: Bytes of cells that are JSON numbers, and of the commas between them.
_JSON_NUMBER_BYTES = b"0123456789.eE+-, "
BLOCK_LINES = 8192
"""Lines read by one orjson call."""
#: Characters that the general path treats otherwise than ``str.split(",")`` would: quoting,
#: a bare carriage return.
_NOT_PLAIN = ('"', "\r")


def plain_lines(text: str) -> list[str] | None:
    """Non-empty lines of ``text`` (header first) when it is plain CSV, else ``None``."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if any(char in text for char in _NOT_PLAIN):
        return None
    lines = list(filter(None, text.split("\n")))
    if len(lines) < 2 or len(set(map(str.count, lines, repeat(",")))) != 1:
        return None
    return lines


def json_numbers(lines: list[str], width: int) -> np.ndarray | None:
    """``lines`` of ``width`` cells each as a float64 matrix when every cell is a JSON number.

    Read ``BLOCK_LINES`` lines at a time, so the text and float objects in flight stay small.
    """
    out = np.empty((len(lines), width))
    for start in range(0, len(lines), BLOCK_LINES):
        block = lines[start : start + BLOCK_LINES]
        try:
            data = ",".join(block).encode("ascii")
        except UnicodeEncodeError:
            return None
        if data.translate(None, _JSON_NUMBER_BYTES):
            return None
        try:
            values = np.array(orjson.loads(b"[" + data + b"]"), dtype=np.float64)
        except (orjson.JSONDecodeError, TypeError, ValueError, OverflowError):
            return None
        if values.ndim != 1 or values.size != len(block) * width:
            return None
        out[start : start + len(block)] = values.reshape(len(block), width)
    return out


def numeric_matrix(
    text: str, unused: Callable[[list[str]], frozenset[int]]
) -> tuple[list[str], np.ndarray] | None:
    """Header and float64 rows of plain CSV ``text``; ``None`` when the general path must run.

    ``unused(header)`` names the columns not to parse (they hold 0.0, as on the general path).
    """
    lines = plain_lines(text)
    if lines is None:
        return None
    header = [name.strip() for name in lines[0].split(",")]
    skip = unused(header)
    if not skip:
        values = json_numbers(lines[1:], len(header))
        if values is not None:
            return header, values
    columns = [j for j in range(len(header)) if j not in skip]
    if not columns:
        return None
    try:
        values = np.loadtxt(
            lines[1:],
            dtype=np.float64,
            delimiter=",",
            comments=None,
            usecols=columns,
            ndmin=2,
        )
    except ValueError:
        return None
    if len(columns) == len(header):
        return header, values
    X = np.zeros((values.shape[0], len(header)))
    X[:, columns] = values
    return header, X
