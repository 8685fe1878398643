"""Bodies of the Open Inference Protocol (KServe V2) routes and of the MLflow/KServe V1 aliases.

Field checks beyond JSON types live in ``service.wire.v2`` (shared with ``/predict``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Scalar = str | int | float | bool
IRIS_ROWS = [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]


class RequestInput(BaseModel):
    """One input tensor: a 2-D ``[rows, features]`` tensor, or one feature column ``[rows]``."""

    name: str = Field(description="Any name for a 2-D input; the feature's name for a column.")
    shape: list[int] = Field(description="`[rows, features]`, or `[rows]` per feature column.")
    datatype: str = Field(description="A numeric type: FP64, FP32, FP16, INT64, ..., UINT8.")
    parameters: dict[str, Scalar] | None = None
    data: list[Any] = Field(description="Row-major values, flat or nested.")


class RequestOutput(BaseModel):
    """An output asked for by name."""

    name: str = Field(description="`label`, `decision` or `probability`.")
    parameters: dict[str, Scalar] | None = None


class InferenceRequest(BaseModel):
    """An Open Inference Protocol inference request."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "inputs": [
                        {"name": "input-0", "shape": [2, 4], "datatype": "FP32"}
                        | {"data": IRIS_ROWS}
                    ]
                }
            ]
        }
    )

    id: str | None = Field(None, description="Echoed in the response (else the X-Request-ID).")
    parameters: dict[str, Scalar] | None = None
    inputs: list[RequestInput]
    outputs: list[RequestOutput] | None = Field(
        None, description="Default: every output the model has (label, decision, probability)."
    )


class ResponseOutput(BaseModel):
    """One output tensor (labels BYTES or INT64; decision and probability FP64, flat)."""

    name: str
    shape: list[int]
    datatype: str
    parameters: dict[str, Scalar] | None = Field(
        None, description="`classes`: the per-class column order, as a JSON array string."
    )
    data: list[Any]


class InferenceResponse(BaseModel):
    """An Open Inference Protocol inference response."""

    model_name: str
    model_version: str
    id: str
    parameters: dict[str, Scalar] | None = Field(None, description="`model_id` of the model.")
    outputs: list[ResponseOutput]


class MetadataTensor(BaseModel):
    """Name, datatype and shape (-1: any number of rows) of an input or output."""

    name: str
    datatype: str
    shape: list[int]


class ModelMetadata(BaseModel):
    """What the model takes and gives."""

    name: str
    versions: list[str]
    platform: str
    inputs: list[MetadataTensor]
    outputs: list[MetadataTensor]


class ModelReady(BaseModel):
    """The model is stored and loads."""

    name: str
    ready: bool


class ServerLive(BaseModel):
    """The process answers."""

    live: bool


class ServerReady(BaseModel):
    """``ready`` as KServe answers it; ``live`` as the protocol's text shows it."""

    ready: bool
    live: bool


class ServerMetadata(BaseModel):
    """Name, version and extensions (`binary_tensor_data`) of the server."""

    name: str
    version: str
    extensions: list[str]


class Predictions(BaseModel):
    """MLflow's and KServe V1's answer: one label per row."""

    predictions: list[int | str]
