"""Initial schema: findings and GPU samples.

Revision ID: 0001
Revises:
Create Date: 2025-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "findings",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("detector", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("severity", sa.String(), nullable=False),
        sa.Column("subject", _JSON, nullable=False),
        sa.Column("summary", sa.String(), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("evidence", _JSON, nullable=False),
        sa.Column("node", sa.String(), nullable=True),
        sa.UniqueConstraint("key", "opened_at", name="uq_findings_key_opened_at"),
    )
    for column in ("key", "detector", "opened_at", "closed_at", "node"):
        op.create_index(f"ix_findings_{column}", "findings", [column])

    op.create_table(
        "gpu_samples",
        sa.Column("id", _BIG_ID, primary_key=True),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("gpu_uuid", sa.String(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("utilization_gpu_percent", sa.Integer(), nullable=True),
        sa.Column("memory_used_bytes", sa.BigInteger(), nullable=True),
        sa.Column("memory_total_bytes", sa.BigInteger(), nullable=True),
        sa.Column("power_milliwatts", sa.BigInteger(), nullable=True),
        sa.Column("process_count", sa.Integer(), nullable=True),
    )
    op.create_index("ix_gpu_samples_node_gpu_uuid_at", "gpu_samples", ["node", "gpu_uuid", "at"])


def downgrade() -> None:
    op.drop_table("gpu_samples")
    op.drop_table("findings")
