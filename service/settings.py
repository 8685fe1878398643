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
        Path("./var"), description="Folder of the server's own files: registry.db and models/."
    )
    model_dir: Path = Field(
        Path("./var/models"), description="Folder holding one folder per model."
    )
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the registry and job queue (e.g. postgresql+psycopg://…); "
        "null means SQLite at data_dir/registry.db.",
    )
    artifact_url: str | None = Field(
        None,
        description="Where fitted models are written (e.g. s3://bucket/prefix); null means "
        "data_dir/models.",
    )
    s3_endpoint_url: str | None = Field(
        None, description="S3 endpoint for artifact_url (MinIO, Ceph); null means AWS."
    )
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Comma-separated API keys; empty means open."
    )
    signing_key: SecretStr | None = Field(
        None, description="When set, artifacts are signed with HMAC-SHA256 instead of plain sha256."
    )
    max_body_mb: float = Field(32.0, gt=0, description="Largest request body accepted (MiB).")
    max_rows: int = Field(200_000, ge=1, description="Most rows in one train or predict request.")
    max_features: int = Field(10_000, ge=1, description="Most features (columns) in one request.")
    max_classes: int = Field(100, ge=2, description="Most distinct classes in one training set.")
    max_iter: int = Field(10_000_000, ge=1, description="Cap on any solver iteration parameter.")
    train_timeout_s: float = Field(600.0, gt=0, description="A training job is stopped after this.")
    train_concurrency: int = Field(2, ge=1, description="Trainings running at once; more get 429.")
    max_queued: int = Field(32, ge=0, description="Trainings waiting in the queue; more get 429.")
    model_cache_size: int = Field(16, ge=1, description="Fitted models kept loaded (LRU).")
    model_cache_mb: float = Field(
        1024.0, gt=0, description="Memory budget of the loaded-model cache (MiB)."
    )
    job_ttl_s: float = Field(3600.0, gt=0, description="Finished jobs are forgotten after this.")
    host: str = Field("127.0.0.1", description="Interface uvicorn binds to.")
    port: int = Field(8000, ge=1, le=65535, description="Port uvicorn listens on.")
    workers: int = Field(
        1, ge=1, le=64, description="Server processes `python -m service` starts (uvicorn workers)."
    )
    dask_scheduler: str | None = Field(
        None,
        description="Dask scheduler address (tcp://host:8786); when set, trainings run on that "
        "cluster (MCMC chains spread over it) instead of in a local worker process.",
    )
    log_level: str = Field("info", description="Python logging level name.")
    public_docs: bool = Field(
        True,
        description="Serve /docs and /openapi.json without an API key (they hold no data).",
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        """Accept ``"k1,k2"`` from the environment as well as a list."""
        if isinstance(value, str):
            return [k.strip() for k in value.split(",") if k.strip()]
        return value
