"""Tags of models (key/value rows, indexed for filtering); a name's model type and feature set.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``model_tags`` and the schema columns of ``names``."""
    op.create_table(
        "model_tags",
        sa.Column(
            "model_id",
            sa.String(34),
            sa.ForeignKey("models.model_id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(256), nullable=False),
    )
    op.create_index("ix_model_tags_key_value", "model_tags", ["key", "value"])
    with op.batch_alter_table("names") as batch:
        batch.add_column(sa.Column("model_type", sa.String(32), nullable=True))
        batch.add_column(sa.Column("signature", sa.Text, nullable=True))


def downgrade() -> None:
    """Drop them again."""
    with op.batch_alter_table("names") as batch:
        batch.drop_column("signature")
        batch.drop_column("model_type")
    op.drop_index("ix_model_tags_key_value", table_name="model_tags")
    op.drop_table("model_tags")
