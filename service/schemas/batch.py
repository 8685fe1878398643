"""Bodies of ``POST /batch-predictions``: score files by reference into files, as a job."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.predict import DEFAULT_LEVEL, MAX_OUTPUTS, MODEL_REF_MAX_CHARS, Output

DataFormat = Literal["parquet", "csv"]
URI_MAX_CHARS = 1024
MAX_KEEP_COLUMNS = 64


class DataRef(BaseModel):
    """Files by reference: a URI under one of the allowed prefixes (``BSVM_DATA_URLS``)."""

    model_config = ConfigDict(extra="forbid")

    uri: str = Field(
        min_length=1,
        max_length=URI_MAX_CHARS,
        description="`s3://bucket/key`, `file:///path` or a path: one object, a prefix ending "
        "in `/`, or a glob (`*.parquet`).",
        examples=["s3://bucket/score/*.parquet"],
    )
    format: DataFormat = Field("parquet", description="`parquet` or `csv` (with a header row).")


class OutputRef(DataRef):
    """Where the answers go: a prefix (ending in `/`) that holds no output yet."""

    uri: str = Field(
        min_length=1,
        max_length=URI_MAX_CHARS,
        description="A prefix, `s3://bucket/out/run-1/` or `file:///data/out/run-1/`: one file "
        "per input file, `part-00000.<format>` ..., then `_SUCCESS` (written last: the output "
        "is complete only once it exists).",
        examples=["s3://bucket/out/run-1/"],
    )


class BatchPredictRequest(BaseModel):
    """Score every row of the input files with one stored model, into one file per input file."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: str = Field(
        min_length=1,
        max_length=MODEL_REF_MAX_CHARS,
        description="A model id, a name (its latest version), `name@alias` or `name:version`; "
        "resolved once, when the job is accepted.",
        examples=["iris-demo@stable"],
    )
    input: DataRef
    output: OutputRef
    outputs: list[Output] = Field(
        default_factory=lambda: ["predictions"],
        min_length=1,
        max_length=MAX_OUTPUTS,
        description="As in `POST /predict`; the columns are named as in its `text/csv` answers.",
    )
    level: float = Field(
        DEFAULT_LEVEL, gt=0.0, lt=1.0, description="Credible level of `intervals`."
    )
    keep_columns: list[str] = Field(
        default_factory=list,
        max_length=MAX_KEEP_COLUMNS,
        description="Input columns copied into the output, before the answer's columns.",
    )


class BatchResult(BaseModel):
    """What a finished batch scoring wrote."""

    output_uri: str = Field(description="The output prefix; complete: it holds `_SUCCESS`.")
    files: list[str] = Field(description="The output files, in the order of the input files.")
    rows: int = Field(description="Rows written, equal to the rows read.")
    model_id: str = Field(description="The model that scored them.")
