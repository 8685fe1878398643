"""Configuration: one pydantic-settings object read from ``BSVM_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob of the service; defaults give a working local server with no other process."""

    model_config = SettingsConfigDict(env_prefix="BSVM_", extra="ignore")

    data_dir: Path = Field(
        Path("./var"),
        description="Embedded defaults live here: registry.db (SQLite) and models/ (artifacts).",
    )
    model_dir: Path | None = Field(
        None,
        description="Folder of file artifacts (one folder per model); default <data_dir>/models. "
        "A folder in the pre-database layout (record.json, names.json) is imported on first start.",
    )
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the registry; default sqlite:///<data_dir>/registry.db. "
        "postgresql+psycopg://user:pw@host/db when several hosts share it.",
    )
    artifact_url: str | None = Field(
        None,
        description="fsspec URL of the artifact store: file:///path (default file://<model_dir>) "
        "or s3://bucket/prefix (extra [s3]).",
    )
    s3_endpoint_url: str | None = Field(
        None, description="Endpoint of an S3-compatible store (MinIO, ...); AWS when unset."
    )
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Comma-separated API keys; empty means open."
    )
    signing_key: SecretStr | None = Field(
        None,
        description="Key of the artifacts' HMAC-SHA256; unset, a random key is created in "
        "signing_key_file on first start. Replicas must share it.",
    )
    signing_key_file: Path | None = Field(
        None,
        description="Where the generated signing key lives (mode 0600); default "
        "<data_dir>/signing.key, outside the artifact store.",
    )
    max_body_mb: float = Field(32.0, gt=0, description="Largest request body accepted (MiB).")
    max_rows: int = Field(200_000, ge=1, description="Most rows in one train or predict request.")
    max_features: int = Field(10_000, ge=1, description="Most features (columns) in one request.")
    max_classes: int = Field(100, ge=2, description="Most distinct classes in one training set.")
    max_iter: int = Field(10_000_000, ge=1, description="Cap on any solver iteration parameter.")
    train_timeout_s: float = Field(600.0, gt=0, description="A training job is stopped after this.")
    train_concurrency: int = Field(
        2, ge=1, description="Trainings running at once in this process; more wait in the queue."
    )
    max_queued: int = Field(
        16, ge=0, description="Trainings waiting in the shared queue; a full queue answers 429."
    )
    job_lease_s: float = Field(
        30.0,
        ge=2.0,
        description="A running job's owner renews its lease this often (/5); a job whose lease "
        "expired (its process died) is queued again once, then failed.",
    )
    sweep_grace_s: float = Field(
        3600.0,
        ge=0.0,
        description="Debris of a crashed save (temporary files, artifacts without a row) older "
        "than this is removed at start; longer than any save in flight on another replica.",
    )
    max_artifact_mb: float = Field(
        512.0,
        gt=0,
        description="Largest fitted model a training may produce, estimated before it starts "
        "(MCMC: draws x chains x coefficients x problems); larger requests get 422.",
    )
    max_cache_mb: float = Field(
        1024.0, gt=0, description="Cap on a kernel SVM's kernel cache (params.cache_mb)."
    )
    worker_memory_mb: float = Field(
        4096.0,
        gt=0,
        description="Address space a training worker may add (RLIMIT_AS); beyond it the training "
        "fails with TRAINING_OUT_OF_MEMORY and the server lives on.",
    )
    predict_memory_mb: float = Field(
        256.0,
        gt=0,
        description="Working memory of one predict: rows are scored in blocks within it.",
    )
    predict_concurrency: int = Field(
        8, ge=1, description="Predicts served at once by one process; more get 503 + Retry-After."
    )
    predict_batching: bool = Field(
        False,
        description="Score concurrent one-row predicts of the same model and outputs in one "
        "vectorised call (adaptive micro-batching, off: JSON predicts of a loaded model are "
        "answered on the event loop, which it does not batch; bench/results.md has the figures).",
    )
    predict_batch_wait_us: int = Field(
        500,
        ge=0,
        le=100_000,
        description="With predict_batching, how long a batch waits for more rows (microseconds) "
        "while requests overlap; a lone request never waits. 0 takes the rows already waiting.",
    )
    model_cache_mb: float = Field(
        1024.0, gt=0, description="Fitted models kept loaded (LRU), bounded by artifact bytes."
    )
    job_ttl_s: float = Field(3600.0, gt=0, description="Finished jobs are forgotten after this.")
    host: str = Field("127.0.0.1", description="Interface uvicorn binds to.")
    port: int = Field(8000, ge=1, le=65535, description="Port uvicorn listens on.")
    log_level: str = Field("info", description="Python logging level name.")
    access_log_flush_ms: float = Field(
        100.0,
        ge=0,
        le=60_000,
        description="Access lines are buffered and written out within this many ms (and at "
        "shutdown, and before any other log line); 0 writes each line at once.",
    )
    workers: int = Field(
        1, ge=1, le=64, description="Server processes started by python -m service."
    )
    dask_scheduler: str | None = Field(
        None, description="tcp://host:8786 runs fits on that Dask cluster (extra [dask])."
    )
    public_docs: bool = Field(
        True,
        description="Serve /docs and /openapi.json without an API key (they hold no data).",
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        description="A request body that sends nothing for this long is cut with 408 "
        "(a body shorter than its Content-Length, a stalled upload).",
    )

    @property
    def models_path(self) -> Path:
        """Folder of file artifacts (and of a pre-database model folder to import)."""
        return self.model_dir if self.model_dir is not None else self.data_dir / "models"

    @property
    def signing_key_path(self) -> Path:
        """The generated signing key's file (used when no signing key is configured)."""
        return self.signing_key_file or self.data_dir / "signing.key"

    @property
    def registry_url(self) -> str:
        """The registry's SQLAlchemy URL, the embedded SQLite file by default."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'registry.db').resolve()}"

    @property
    def artifacts_url(self) -> str:
        """The artifact store's fsspec URL, a local folder by default."""
        if self.artifact_url:
            return self.artifact_url
        return f"file://{self.models_path.resolve()}"

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        """Accept ``"k1,k2"`` from the environment as well as a list."""
        if isinstance(value, str):
            return [k.strip() for k in value.split(",") if k.strip()]
        return value
