"""Alerts as Alertmanager reported them, and manual interventions (recorded or detected).

Revision ID: 0003
Revises: 0002
Create Date: 2025-12-14
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", _BIG_ID, primary_key=True),
        sa.Column("fingerprint", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("severity", sa.String(), nullable=True),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("labels", _JSON, nullable=False),
        sa.Column("summary", sa.String(), nullable=True),
        sa.UniqueConstraint("fingerprint", "starts_at", name="uq_alerts_fingerprint_starts_at"),
    )
    op.create_index("ix_alerts_starts_at", "alerts", ["starts_at"])

    op.create_table(
        "interventions",
        sa.Column("id", _BIG_ID, primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("by", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("subject", _JSON, nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("detail", _JSON, nullable=False),
    )
    op.create_index("ix_interventions_at", "interventions", ["at"])


def downgrade() -> None:
    op.drop_table("interventions")
    op.drop_table("alerts")
