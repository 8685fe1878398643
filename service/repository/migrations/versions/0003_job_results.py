"""The fitted model of a job whose save failed on a transient error, kept until it is stored.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``job_results``."""
    op.create_table(
        "job_results",
        sa.Column(
            "job_id",
            sa.String(34),
            sa.ForeignKey("jobs.job_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("model_id", sa.String(34), nullable=False),
        sa.Column("record", sa.Text, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("stored_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    """Drop it again."""
    op.drop_table("job_results")
