"""A V2 inference response with outputs as binary data (the binary tensor data extension).

``formats.v2_response``'s outputs the request asked for as binary data (``binary_tensors``) are
sent as bytes after the JSON object, ``Content-Type: application/octet-stream`` and the JSON's
length in ``Inference-Header-Content-Length``; a response with none is the plain JSON object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

from service.api.ready_bytes import JSON_TYPE, ReadyBytes
from service.inference import binary_tensors

BINARY_TYPE = (b"content-type", binary_tensors.MEDIA_TYPE.encode())


def encoded(response: dict[str, Any], wanted: Mapping[str, bool]) -> ReadyBytes:
    """``response`` as JSON, or as JSON then the binary data of the ``wanted`` outputs."""
    head, data = binary_tensors.encode(response, wanted)
    if not data:
        return ReadyBytes(head, [JSON_TYPE])
    return ReadyBytes(head + data, [BINARY_TYPE, (binary_tensors.HEADER_KEY, b"%d" % len(head))])


def respond(response: dict[str, Any], wanted: Mapping[str, bool]) -> Response:
    """``encoded`` as a ``Response``, for a route to return."""
    ready = encoded(response, wanted)
    headers = {key.decode(): value.decode() for key, value in ready.headers}
    return Response(ready.body, headers=headers)


def wants_binary(wanted: Mapping[str, bool]) -> bool:
    """True when any output is asked for as binary data."""
    return any(wanted.values())
