"""Jobs of more than one kind (``train``, ``batch_predict``), and what a job that stores no model
gives back (``result``, JSON: a batch scoring's output URI, files and rows).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``jobs.kind`` (existing rows are trainings) and ``jobs.result``."""
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("kind", sa.String(16), nullable=False, server_default="train"))
        batch.add_column(sa.Column("result", sa.Text, nullable=True))


def downgrade() -> None:
    """Drop them again."""
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("result")
        batch.drop_column("kind")
