"""The first schema: names, models, aliases, jobs, job payloads, registry metadata.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create every table of the first schema."""
    op.create_table(
        "names",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("next_version", sa.Integer, nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "models",
        sa.Column("model_id", sa.String(34), primary_key=True),
        sa.Column("name", sa.String(64), sa.ForeignKey("names.name"), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("model_type", sa.String(32), nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("artifact_bytes", sa.BigInteger, nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.UniqueConstraint("name", "version", name="uq_models_name_version"),
    )
    op.create_index("ix_models_model_type", "models", ["model_type"])
    op.create_index("ix_models_created_at", "models", ["created_at"])
    op.create_table(
        "aliases",
        sa.Column("name", sa.String(64), sa.ForeignKey("names.name"), primary_key=True),
        sa.Column("alias", sa.String(32), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.String(32), nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.String(34), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("model_type", sa.String(32), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("progress", sa.Float, nullable=False),
        sa.Column("owner", sa.String(128), nullable=True),
        sa.Column("lease_expires", sa.Float, nullable=True),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.String(32), nullable=False),
        sa.Column("started_at", sa.String(32), nullable=True),
        sa.Column("finished_at", sa.String(32), nullable=True),
        sa.Column("ended", sa.Float, nullable=True),
        sa.Column("model_id", sa.String(34), nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("ix_jobs_status_created", "jobs", ["status", "created_at"])
    op.create_index("ix_jobs_name", "jobs", ["name"])
    op.create_table(
        "job_payloads",
        sa.Column(
            "job_id",
            sa.String(34),
            sa.ForeignKey("jobs.job_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "registry_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )


def downgrade() -> None:
    """Drop every table of the first schema."""
    for table in ("registry_meta", "job_payloads", "jobs", "aliases", "models", "names"):
        op.drop_table(table)
