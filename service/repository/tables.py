"""The registry's tables (SQLAlchemy Core): models, names, aliases, jobs, their payloads and the
fitted models of jobs whose save is being retried (``job_results``).

A model row is written in the same transaction that allocates its version, after its artifact is
stored, so a model is visible only once both are committed. ``UNIQUE (name, version)`` guards the
allocation; ``names.next_version`` makes versions never reused, even after a delete.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

ACTIVE_TARGET = text("target IS NOT NULL AND status IN ('queued', 'running')")
"""The jobs whose ``target`` is held: queued or running ones that write somewhere."""

names = Table(
    "names",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("next_version", Integer, nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("model_type", String(32), nullable=True, doc="Fixed by the name's first model."),
    Column("signature", Text, nullable=True, doc="JSON feature set fixed by the first model."),
)

models = Table(
    "models",
    metadata,
    Column("model_id", String(34), primary_key=True),
    Column("name", String(64), ForeignKey("names.name"), nullable=False),
    Column("version", Integer, nullable=False),
    Column("model_type", String(32), nullable=False),
    Column("created_at", String(32), nullable=False),
    Column("artifact_bytes", BigInteger, nullable=False),
    Column("record", Text, nullable=False, doc="The model record as JSON (without aliases)."),
    UniqueConstraint("name", "version", name="uq_models_name_version"),
    Index("ix_models_model_type", "model_type"),
    Index("ix_models_created_at", "created_at"),
)

aliases = Table(
    "aliases",
    metadata,
    Column("name", String(64), ForeignKey("names.name"), primary_key=True),
    Column("alias", String(32), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("updated_at", String(32), nullable=False),
)

model_tags = Table(
    "model_tags",
    metadata,
    Column(
        "model_id", String(34), ForeignKey("models.model_id", ondelete="CASCADE"), primary_key=True
    ),
    Column("key", String(64), primary_key=True),
    Column("value", String(256), nullable=False),
    Index("ix_model_tags_key_value", "key", "value"),
)

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", String(34), primary_key=True),
    Column("status", String(16), nullable=False),
    Column("model_type", String(32), nullable=False),
    Column("name", String(64), nullable=False),
    Column("progress", Float, nullable=False, default=0.0),
    Column("owner", String(128), nullable=True, doc="host:pid:uuid of the process running it."),
    Column("lease_expires", Float, nullable=True, doc="Epoch seconds; renewed by the owner."),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("created_at", String(32), nullable=False),
    Column("started_at", String(32), nullable=True),
    Column("finished_at", String(32), nullable=True),
    Column("ended", Float, nullable=True, doc="Epoch seconds of the end, for the TTL."),
    Column("model_id", String(34), nullable=True),
    Column("error", Text, nullable=True, doc="JSON {code, message, details} when it failed."),
    Column("kind", String(16), nullable=False, server_default="train", doc="train, batch_predict."),
    Column("result", Text, nullable=True, doc="JSON of a job that stores no model, when done."),
    Column("progress_detail", Text, nullable=True, doc="JSON: passes, partitions, iterations."),
    Column("target", String(1024), nullable=True, doc="A batch job's output prefix (its URL)."),
    Index("ix_jobs_status_created", "status", "created_at"),
    Index("ix_jobs_name", "name"),
    Index(
        "uq_jobs_active_target",
        "target",
        unique=True,
        sqlite_where=ACTIVE_TARGET,
        postgresql_where=ACTIVE_TARGET,
    ),
)
"""``uq_jobs_active_target``: one queued or running job per output prefix, in every process."""

job_payloads = Table(
    "job_payloads",
    metadata,
    Column("job_id", String(34), ForeignKey("jobs.job_id", ondelete="CASCADE"), primary_key=True),
    Column("data", LargeBinary, nullable=False, doc="The task: npz arrays + JSON, no pickle."),
)

job_results = Table(
    "job_results",
    metadata,
    Column("job_id", String(34), ForeignKey("jobs.job_id", ondelete="CASCADE"), primary_key=True),
    Column("model_id", String(34), nullable=False, doc="Chosen once for the job's model."),
    Column("record", Text, nullable=False, doc="The model record as JSON, digest included."),
    Column("data", LargeBinary, nullable=False, doc="The signed artifact bytes."),
    Column("stored_at", Float, nullable=False, doc="Epoch seconds of the first failed save."),
)

settings_table = Table(
    "registry_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
