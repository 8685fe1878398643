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
        description="The embedded defaults live here: `registry.db` (SQLite) and `models/` "
        "(artifacts).",
    )
    database_url: str | None = Field(
        None,
        description="The registry (models, names, versions, aliases, jobs), a SQLAlchemy URL; "
        "`postgresql+psycopg://user:pw@host/db` (extra `postgres`) when several hosts share it. "
        "alembic migrations run at start.",
        json_schema_extra={"shown_default": "`sqlite:///<data dir>/registry.db`"},
    )
    artifact_url: str | None = Field(
        None,
        description="Where fitted models are written (write-once, by model id): a folder "
        "(`file:///path`), or `s3://bucket/prefix` (extra `s3`).",
        json_schema_extra={"shown_default": "`file://<model dir>`"},
    )
    s3_endpoint_url: str | None = Field(
        None,
        description="An S3-compatible store (MinIO, Ceph); credentials from the usual `AWS_*` "
        "variables.",
        json_schema_extra={"shown_default": "unset (AWS)"},
    )
    model_dir: Path | None = Field(
        None,
        description="The file artifact folder. A folder of the pre-database layout "
        "(`record.json`, `names.json`) is imported only when an operator runs "
        "`bsvm-import-legacy` (never at start); it signs nothing, so its models with a plain "
        "SHA-256 are listed but refused on load.",
        json_schema_extra={"shown_default": "`<data dir>/models`"},
    )
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated keys; when set, every route but the probes (`/health/*`, "
        "`/v2/health/*`), `/` and the public docs needs `X-API-Key` (the `/ui` pages take it in a "
        "form, as a session cookie).",
        json_schema_extra={"shown_default": "empty (open)"},
    )
    public_docs: bool = Field(
        True,
        description="Serve `/docs` and `/openapi.json` without a key (a browser cannot send one, "
        "and they hold no data); `false` puts them behind the key too.",
    )
    signing_key: SecretStr | None = Field(
        None,
        description="The key of the artifacts' HMAC-SHA256 (over the model's id, type and "
        "features with the bytes); artifacts are always signed, and a row's signature is checked "
        "before any unpickling. Unset, the first start creates a random "
        "32-byte key in `BSVM_SIGNING_KEY_FILE`.",
    )
    signing_key_file: Path | None = Field(
        None,
        description="The generated key (mode 0600, outside the artifact store, so write access to "
        "artifacts and rows is not enough to forge one). Replicas must share the key: set the "
        "same `BSVM_SIGNING_KEY` on every replica (from your secret store), or mount one key "
        "file on all.",
        json_schema_extra={"shown_default": "`<data dir>/signing.key`"},
    )
    max_body_mb: float = Field(
        32.0, gt=0, description="Largest request body (MiB), counted as it streams in (413 above)."
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        description="A request body that sends nothing for this long (shorter than its "
        "`Content-Length`, a stalled upload) is cut with 408 `REQUEST_TIMEOUT`.",
    )
    max_rows: int = Field(
        200_000, ge=1, description="Most rows in one train or predict request (422 above)."
    )
    max_features: int = Field(
        10_000, ge=1, description="Most features (columns) in one request (422 above)."
    )
    max_classes: int = Field(
        100, ge=2, description="Most distinct classes in one training set (422 above)."
    )
    max_iter: int = Field(10_000_000, ge=1, description="Cap on any solver iteration parameter.")
    train_timeout_s: float = Field(
        600.0, gt=0, description="A training's worker process is stopped after this."
    )
    batch_timeout_s: float = Field(
        3600.0,
        gt=0,
        description="A batch scoring job is stopped after this, leaving nothing at its output.",
    )
    train_concurrency: int = Field(
        2,
        ge=1,
        description="Trainings running at once in one server process; more wait in the queue.",
    )
    warm_workers: int = Field(
        2,
        ge=0,
        le=16,
        description="Training worker processes each server process keeps started and waiting "
        "for a task (each serves one training, then is replaced in the background; each waiting "
        "one holds about 15-20 MiB of its own); 0 starts every worker when its training does. "
        "With fewer than `BSVM_TRAIN_CONCURRENCY`, a training that follows another at once may "
        "wait for the replacement to start and fit in a worker not yet warm.",
    )
    max_queued: int = Field(
        16,
        ge=0,
        description="Trainings waiting in the shared queue; only a full queue answers 429 with "
        "`Retry-After`.",
    )
    job_lease_s: float = Field(
        30.0,
        ge=2.0,
        description="A running job's process renews its lease (and writes its progress) every "
        "fifth of this or every second, whichever is shorter; a job whose lease expired is "
        "queued again once, then failed (`TRAINING_ABANDONED`).",
    )
    job_ttl_s: float = Field(3600.0, gt=0, description="Finished jobs are forgotten after this.")
    plot_wait_s: float = Field(
        30.0,
        ge=0.0,
        le=600.0,
        description="The ν path of an `em_svm` or `ecme_svm` model and its comparison plot are "
        "computed after the training answers; their routes (`/path`, `path.png`, `compare.png`) "
        "wait this long for them, then answer 409 with `Retry-After`.",
    )
    save_retry_s: float = Field(
        600.0,
        ge=0.0,
        description="A background training whose fit succeeded but whose model could not be "
        "stored (the artifact store or the database unreachable) keeps the fitted model (in its "
        "job's row, or in memory while the database is down) and retries the save with backoff "
        "for this long, then fails with the reason. A synchronous training answers 503 "
        "(`STORE_UNAVAILABLE` or `DATABASE_UNAVAILABLE`, with `Retry-After`) instead of waiting.",
    )
    startup_timeout_s: float = Field(
        30.0,
        ge=0.0,
        description="At start, `python -m service` retries opening the registry and the artifact "
        "store (a data folder it cannot write, a database it cannot reach) with backoff for this "
        "long, then exits with status 1 and one log line naming the cause, so that an "
        "orchestrator restarts it. Once the server runs, an outage answers 503 instead.",
    )
    sweep_grace_s: float = Field(
        3600.0,
        ge=0.0,
        description="At start, debris of interrupted saves (temporary files, artifacts without a "
        "row) older than this is removed; keep it longer than any save in flight on another "
        "replica.",
    )
    max_artifact_mb: float = Field(
        512.0,
        gt=0,
        description="Largest fitted model a training may produce, estimated from the request "
        "before it starts (MCMC draws × chains × coefficients × one-vs-rest problems, support "
        "vectors, covariances); above it 422 names the parameter and the bound.",
    )
    max_cache_mb: float = Field(
        1024.0, gt=0, description="Cap on a kernel SVM's `params.cache_mb` (422 above)."
    )
    worker_memory_mb: float = Field(
        4096.0,
        gt=0,
        description="Address space a training worker may add to what it starts with "
        "(`RLIMIT_AS`); a fit that needs more fails with `TRAINING_OUT_OF_MEMORY` (422) and the "
        "server lives on.",
    )
    predict_memory_mb: float = Field(
        256.0,
        gt=0,
        description="Working memory of one predict: rows are scored in blocks that fit in it, "
        "whatever the row count (intervals included).",
    )
    predict_concurrency: int = Field(
        8,
        ge=1,
        description="Predicts served at once by one process; more answer 503 with `Retry-After`.",
    )
    predict_batching: bool = Field(
        False,
        description="One-row predicts of the same model and outputs that arrive together are "
        "scored in one vectorised call (adaptive micro-batching; each request still gets its own "
        "answer or error), each holding its `BSVM_PREDICT_CONCURRENCY` slot while it waits. Off "
        "by default: without it a JSON predict of a loaded model is answered on the event loop, "
        "and batching won (+20 % at 32 clients) only before that path existed "
        "(`bench/results.md`).",
    )
    predict_batch_wait_us: int = Field(
        500,
        ge=0,
        le=100_000,
        description="While requests overlap, how long a batch waits for more rows before it is "
        "scored (microseconds); a lone request never waits; `0` takes only the rows already "
        "waiting.",
    )
    store_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Longest wait on one artifact-store call (read, write, delete, list); S3 "
        "calls also connect within 5 s and read within this. A store down or hanging answers "
        "503 `STORE_UNAVAILABLE` with `Retry-After` after at most this, never 500.",
    )
    stale_if_error_s: float = Field(
        300.0,
        ge=0,
        description="While the registry database is unreachable, a predict of a model this "
        "process has loaded is answered from memory (by id, or by name and alias from the last "
        "answer the database gave) for up to this long after that answer was due again, as "
        "HTTP's `stale-if-error`; `0` answers 503 `DATABASE_UNAVAILABLE` at once.",
    )
    model_cache_mb: float = Field(
        1024.0,
        gt=0,
        description="Fitted models kept loaded (LRU), bounded by their artifact bytes.",
    )
    host: str = Field("127.0.0.1", description="The interface uvicorn listens on.")
    port: int = Field(8000, ge=1, le=65535, description="The port uvicorn listens on.")
    workers: int = Field(
        1,
        ge=1,
        le=64,
        description="Server processes `python -m service` starts (each builds its own app; they "
        "share the registry).",
    )
    dask_scheduler: str | None = Field(
        None,
        description="`tcp://host:8786`: trainings run on that Dask cluster (extra `dask`), MCMC "
        "chains, one-vs-one/rest problems and Platt folds spread over its workers; unset, each "
        "training runs in a local worker process.",
    )
    data_urls: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated URL prefixes (`s3://bucket/in/`, `file:///srv/data/`) that "
        "data by reference may be read from or written to; each is a folder (a `/` is added). "
        "A URI outside every prefix after normalisation (`..`, percent-escapes, symlinks, other "
        "schemes) is refused (422 naming `data.uri`) before the store is touched. Credentials "
        "come from the server (`AWS_*`, `BSVM_S3_ENDPOINT_URL`), never from the request.",
        json_schema_extra={"shown_default": "empty (data by reference off)"},
    )
    log_level: str = Field(
        "info",
        description="A Python logging level name. Logs are JSON lines; one per request with "
        "request id, route, status, latency and model id.",
    )
    access_log_flush_ms: float = Field(
        100.0,
        ge=0,
        le=60_000,
        description="The per-request access lines are buffered and written out within this many "
        "ms, before any other log line, and at shutdown (as Envoy and nginx buffer access logs; "
        "a `kill -9` loses at most this window); `0` writes each line at once.",
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

    @field_validator("api_keys", "data_urls", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        """Accept ``"k1,k2"`` from the environment as well as a list."""
        if isinstance(value, str):
            return [k.strip() for k in value.split(",") if k.strip()]
        return value
