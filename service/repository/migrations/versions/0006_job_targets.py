"""Where a batch job writes (``jobs.target``, its output prefix's URL) and at most one queued or
running job per target (``uq_jobs_active_target``, a partial unique index), so two batch jobs
never commit into one prefix, whichever processes run them.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

ACTIVE_TARGET = sa.text("target IS NOT NULL AND status IN ('queued', 'running')")


def upgrade() -> None:
    """Add ``jobs.target`` (null for every existing row) and its partial unique index."""
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("target", sa.String(1024), nullable=True))
    op.create_index(
        "uq_jobs_active_target",
        "jobs",
        ["target"],
        unique=True,
        sqlite_where=ACTIVE_TARGET,
        postgresql_where=ACTIVE_TARGET,
    )


def downgrade() -> None:
    """Drop them again."""
    op.drop_index("uq_jobs_active_target", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("target")
