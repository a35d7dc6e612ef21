"""Probe runs and scheduler state: queue samples and the node change log.

Revision ID: 0002
Revises: 0001
Create Date: 2025-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "probe_runs",
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("probe", sa.String(), nullable=False),
        sa.Column("tenant", sa.String(), nullable=False),
        sa.Column("queue", sa.String(), nullable=True),
        sa.Column("window", sa.String(), nullable=True),
        sa.Column("expectation", sa.String(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("job_id", sa.String(), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("message", sa.String(), nullable=True),
        sa.Column("pending_reasons", _JSON, nullable=False),
    )
    for column in ("submitted_at", "state", "tenant"):
        op.create_index(f"ix_probe_runs_{column}", "probe_runs", [column])

    op.create_table(
        "queue_samples",
        sa.Column("id", _BIG_ID, primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant", sa.String(), nullable=False),
        sa.Column("queue", sa.String(), nullable=True),
        sa.Column("pending_jobs", sa.Integer(), nullable=False),
        sa.Column("pending_gpus", sa.Integer(), nullable=False),
        sa.Column("running_jobs", sa.Integer(), nullable=False),
        sa.Column("running_gpus", sa.Integer(), nullable=False),
        sa.Column("longest_wait_seconds", sa.Float(), nullable=False),
        sa.Column("pending_reasons", _JSON, nullable=False),
    )
    op.create_index("ix_queue_samples_at", "queue_samples", ["at"])

    op.create_table(
        "node_states",
        sa.Column("id", _BIG_ID, primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("pool", sa.String(), nullable=True),
        sa.Column("gpus_total", sa.Integer(), nullable=False),
        sa.Column("gpus_allocated", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("removed", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_node_states_at", "node_states", ["at"])
    op.create_index("ix_node_states_node_at_id", "node_states", ["node", "at", "id"])


def downgrade() -> None:
    op.drop_table("node_states")
    op.drop_table("queue_samples")
    op.drop_table("probe_runs")
