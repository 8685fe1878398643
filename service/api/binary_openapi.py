"""``openapi_extra`` of the routes that take binary tensor data (``binary_tensors``).

The body ``application/octet-stream`` (with a text-only example: a page cannot show raw bytes),
the ``Inference-Header-Content-Length`` header, and the 200 that may come as bytes.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from service.schemas.v2 import IRIS_ROWS
from service.wire import v2_binary as binary_tensors

BINARY = {"schema": {"type": "string", "format": "binary"}}
EXAMPLE = json.dumps(
    {
        "inputs": [{"name": "input-0", "shape": [2, 4], "datatype": "FP64", "data": IRIS_ROWS}],
        "parameters": {"binary_data_output": True},
    },
    separators=(",", ":"),
)
"""A binary-extension body that is all text: JSON inputs, outputs asked for as binary data."""
V2_ANSWER = (
    "A V2 inference response; outputs asked for as binary data (an output's "
    "`parameters.binary_data`, or the request's `parameters.binary_data_output`) follow its "
    f"JSON object, with `{binary_tensors.HEADER}` giving the JSON's length."
)
HEADER_PARAMETER = {
    "name": binary_tensors.HEADER,
    "in": "header",
    "required": False,
    "schema": {"type": "integer", "minimum": 1},
    "description": f"Binary tensor data: {binary_tensors.MEANING}.",
}
BODY = BINARY | {
    "examples": {
        "binary_outputs": {
            "summary": "JSON inputs, outputs as binary data",
            "description": f"Send with `{binary_tensors.HEADER}: {len(EXAMPLE)}` (this text's "
            "length: it holds no binary input); binary inputs follow the JSON as raw bytes.",
            "value": EXAMPLE,
        }
    }
}
ANSWER_HEADERS = {
    binary_tensors.HEADER: {
        "schema": {"type": "integer"},
        "description": "Sent with binary outputs: the JSON object's length in bytes.",
    }
}


def with_binary_data(extra: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    """A copy of ``extra`` that also declares the binary body, its header and the binary 200
    (whose description becomes ``description`` when given)."""
    out = copy.deepcopy(extra)
    out.setdefault("parameters", []).append(dict(HEADER_PARAMETER))
    content = out.setdefault("requestBody", {}).setdefault("content", {})
    content[binary_tensors.MEDIA_TYPE] = copy.deepcopy(BODY)
    ok = out.setdefault("responses", {}).setdefault("200", {})
    ok.setdefault("content", {})[binary_tensors.MEDIA_TYPE] = dict(BINARY)
    ok["headers"] = copy.deepcopy(ANSWER_HEADERS)
    if description is not None:
        ok["description"] = description
    return out
