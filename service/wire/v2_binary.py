"""The Open Inference Protocol's binary tensor data extension: tensors as raw bytes after the JSON.

A request whose ``Inference-Header-Content-Length`` header gives the length of its JSON object
carries, after that object, the bytes of every input whose ``parameters.binary_data_size`` is set,
in the order of ``inputs``: little-endian, row-major, no padding (KServe's and Triton's
"binary_tensor_data"). Outputs come back as bytes when the request's
``parameters.binary_data_output`` or an output's ``parameters.binary_data`` is true (the output's
own setting wins); the response is then its JSON object followed by those bytes, in the order of
its ``outputs``, with the JSON's length in its own ``Inference-Header-Content-Length``. Labels are
INT64 (8 bytes each) or BYTES (a 4-byte little-endian length, then the UTF-8 text); decision
values and probabilities FP64.

Pure functions; every failure is a 422 (``InvalidInput``) naming the field as the sender wrote it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from service.inference.query import PredictQuery
from service.wire import v2
from service.wire.answer import Answer
from service.wire.media import BINARY_MEDIA_TYPE
from service.wire.rows import Rows, invalid, query_of

HEADER = "Inference-Header-Content-Length"
HEADER_KEY = HEADER.lower().encode()
MEANING = "the JSON object's length in bytes; the inputs' binary data follows it"
MEDIA_TYPE = BINARY_MEDIA_TYPE
EXTENSION = "binary_tensor_data"
"""The extension's name in the server metadata's ``extensions``."""
DTYPES = {
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "INT8": np.dtype("i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "UINT8": np.dtype("u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
}
"""The numeric datatypes a feature tensor may have, as little-endian numpy types."""
assert set(DTYPES) == v2.V2_NUMERIC
_LENGTH = struct.Struct("<I")


def json_length(value: str, body_length: int) -> int:
    """The ``Inference-Header-Content-Length`` header's value: the length of the JSON object."""
    if not (value.isascii() and value.isdigit()):
        raise invalid(HEADER, f"must be a byte count (digits), not {value[:40]!r}", "bad header")
    if len(value) > len(str(body_length)):  # also keeps int() off a 5,000-digit string
        raise invalid(HEADER, f"is longer than the body ({body_length} bytes)", "bad header")
    length = int(value)
    if not 0 < length <= body_length:
        problem = f"is {length}; the body holds {body_length} bytes"
        raise invalid(HEADER, problem, "bad header")
    return length


def split(body: bytes, header_value: str) -> tuple[dict[str, Any], memoryview]:
    """The request's JSON object, and the bytes after it (its inputs' binary data)."""
    length = json_length(header_value, len(body))
    try:
        request = orjson.loads(memoryview(body)[:length])
    except orjson.JSONDecodeError as exc:
        where = f"the first {length} bytes ({HEADER}) are not JSON: {exc}"
        raise invalid("body", where, "the body is not valid JSON") from None
    if type(request) is not dict:
        raise invalid("body", f"the first {length} bytes must be a JSON object")
    return request, memoryview(body)[length:]


def _parameters(value: Any, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise invalid(field, "must be an object of parameters")
    return value


def _binary_tensor(tensor: dict[str, Any], i: int, size: Any, data: memoryview, at: int):
    """Name, shape and flat float64 values of input ``i``, read from ``data[at:at + size]``."""
    field = f"inputs[{i}]"
    size_field = f"{field}.parameters.binary_data_size"
    if "data" in tensor:
        raise invalid(f"{field}.data", "give data or parameters.binary_data_size, not both")
    for key in ("name", "shape", "datatype"):
        if key not in tensor:
            raise invalid(f"{field}.{key}", "is required")
    name, datatype = tensor["name"], tensor["datatype"]
    if type(name) is not str or not name:
        raise invalid(f"{field}.name", "must be a non-empty string")
    if datatype not in DTYPES:
        raise invalid(f"{field}.datatype", f"must be a numeric type: {sorted(DTYPES)}")
    shape = v2.check_shape(tensor["shape"], f"{field}.shape")
    if type(size) is not int or size < 0:
        raise invalid(size_field, "must be a non-negative integer (bytes)")
    dtype = DTYPES[datatype]
    count = math.prod(shape)
    if size != count * dtype.itemsize:
        needs = count * dtype.itemsize
        raise invalid(size_field, f"is {size}; shape {shape} of {datatype} needs {needs} bytes")
    if at + size > len(data):
        problem = f"is {size} from byte {at}; the body holds {len(data)} bytes after its JSON"
        raise invalid(size_field, problem)
    values = np.frombuffer(data, dtype=dtype, count=count, offset=at).astype(np.float64)
    return name, shape, values


def tensors(request: Mapping[str, Any], data: memoryview) -> list[tuple[str, list[int], Any]]:
    """Name, shape and flat values of each input: binary ones from ``data``, others from JSON."""
    inputs = request.get("inputs")
    if type(inputs) is not list or not inputs:
        raise invalid("inputs", "must be a non-empty list of tensors")
    out, at = [], 0
    for i, tensor in enumerate(inputs):
        if type(tensor) is not dict:
            raise invalid(f"inputs[{i}]", "must be a tensor {name, shape, datatype, ...}")
        parameters = _parameters(tensor.get("parameters"), f"inputs[{i}].parameters")
        size = parameters.get("binary_data_size")
        if size is None:
            out.append(v2.v2_tensor(tensor, i))
            continue
        out.append(_binary_tensor(tensor, i, size, data, at))
        at += size
    if at != len(data):
        problem = f"{len(data)} bytes follow the JSON; the inputs' binary_data_size add up to {at}"
        raise invalid("body", problem)
    return out


def rows(request: Mapping[str, Any], data: memoryview) -> Rows:
    """The rows of a request with binary inputs (see ``v2.tensor_rows``)."""
    found = tensors(request, data)
    binary = type(found[0][2]) is np.ndarray
    return v2.tensor_rows(found, "inputs[0]" if binary else "inputs[0].data")


def binary_outputs(request: Mapping[str, Any]) -> dict[str, bool]:
    """Which outputs (V2 names) are asked for as binary data; ``"*"``: the default for others."""
    every = _parameters(request.get("parameters"), "parameters").get("binary_data_output", False)
    if type(every) is not bool:
        raise invalid("parameters.binary_data_output", "must be true or false")
    wanted = {"*": every}
    outputs = request.get("outputs")
    for i, item in enumerate(outputs if type(outputs) is list else ()):
        if type(item) is not dict:
            continue  # v2.v2_requested names what is wrong with it
        parameters = _parameters(item.get("parameters"), f"outputs[{i}].parameters")
        if "binary_data" in parameters:
            if type(parameters["binary_data"]) is not bool:
                raise invalid(f"outputs[{i}].parameters.binary_data", "must be true or false")
            wanted[str(item.get("name"))] = parameters["binary_data"]
    return wanted


def _bytes_of(tensor: Mapping[str, Any]) -> bytes:
    """The binary data of one response tensor (see the module docstring for the layouts)."""
    values = tensor["data"]
    if tensor["datatype"] == "BYTES":
        parts = []
        for value in values:
            text = str(value).encode()
            parts += (_LENGTH.pack(len(text)), text)
        return b"".join(parts)
    return np.asarray(values, dtype=DTYPES[tensor["datatype"]]).tobytes()


def encode(response: dict[str, Any], wanted: Mapping[str, bool]) -> tuple[bytes, bytes]:
    """(JSON, binary data) of a V2 response: the ``wanted`` outputs' data moved into the bytes.

    The binary data is empty when no output is wanted as binary: the response is plain JSON.
    """
    parts = []
    for tensor in response["outputs"]:
        if not wanted.get(tensor["name"], wanted.get("*", False)):
            continue
        raw = _bytes_of(tensor)
        del tensor["data"]
        tensor["parameters"] = {**(tensor.get("parameters") or {}), "binary_data_size": len(raw)}
        parts.append(raw)
    return orjson.dumps(response), b"".join(parts)


def decode(
    body: bytes, header_value: str, ref: str, field: str = "model"
) -> tuple[PredictQuery, dict[str, Any]]:
    """The query of a request with binary tensor data, and its JSON object (for the answer)."""
    request, data = split(body, header_value)
    response_id = request.get("id")
    if response_id is not None and type(response_id) is not str:
        raise invalid("id", "must be a string")
    binary_outputs(request)  # its 422s before any scoring
    found = rows(request, data)
    return query_of(found, ref, v2.v2_requested(request.get("outputs")), field), request


def answer(out: Mapping[str, Any], request: Mapping[str, Any], request_id: str) -> Answer:
    """Our outputs as a V2 response to ``request``: JSON, then the outputs it asked for as
    binary data (``Inference-Header-Content-Length`` gives the JSON's length)."""
    response = v2.v2_response(out, str(request.get("id") or request_id))
    head, data = encode(response, binary_outputs(request))
    if not data:
        return Answer(head)
    return Answer(head + data, MEDIA_TYPE, {HEADER: str(len(head))})
