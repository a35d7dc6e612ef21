"""The inference probe's service: its looks (replicas ready, one request to each, the
latencies) and the changes it carried through (start, scale-out, rolling restart).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "inference_samples",
        sa.Column("id", _BIG_ID, primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("service", sa.String(), nullable=False),
        sa.Column("desired_replicas", sa.Integer(), nullable=False),
        sa.Column("ready_replicas", sa.Integer(), nullable=False),
        sa.Column("pending_replicas", sa.Integer(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("latencies_ms", _JSON, nullable=False),
    )
    op.create_index("ix_inference_samples_at", "inference_samples", ["at"])
    op.create_table(
        "inference_phases",
        sa.Column("id", _BIG_ID, primary_key=True),
        sa.Column("service", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ready_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("replicas_from", sa.Integer(), nullable=False),
        sa.Column("replicas_to", sa.Integer(), nullable=False),
        sa.Column("pending_seconds", sa.Float(), nullable=False),
        sa.Column("pending_reason", sa.String(), nullable=True),
        sa.Column("unavailable_seconds", sa.Float(), nullable=False),
        sa.UniqueConstraint("service", "kind", "started_at", name="uq_inference_phases_phase"),
    )
    op.create_index("ix_inference_phases_ready_at", "inference_phases", ["ready_at"])


def downgrade() -> None:
    op.drop_table("inference_phases")
    op.drop_table("inference_samples")
