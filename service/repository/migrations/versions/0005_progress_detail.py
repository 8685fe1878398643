"""What a running job is doing beyond its fraction (``jobs.progress_detail``, JSON): a training by
reference's pass, partitions and iterations, a batch scoring's files.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``jobs.progress_detail`` (null for every existing row)."""
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("progress_detail", sa.Text, nullable=True))


def downgrade() -> None:
    """Drop it again."""
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("progress_detail")
