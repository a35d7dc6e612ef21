"""Where each probe ran and whether its logs were read back, the tenant behind each GPU
sample, an index to read samples by period, and the delivery record of every report.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("probe_runs") as batch:
        batch.add_column(sa.Column("node_names", _JSON, nullable=False, server_default="[]"))
        batch.add_column(sa.Column("log_checked_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("gpu_samples") as batch:
        batch.add_column(sa.Column("tenant", sa.String(), nullable=True))
    op.create_index("ix_gpu_samples_at", "gpu_samples", ["at"])

    op.create_table(
        "report_deliveries",
        sa.Column("id", _BIG_ID, primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("report", sa.String(), nullable=False),
        sa.Column("channel", sa.String(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("detail", sa.String(), nullable=True),
    )
    op.create_index("ix_report_deliveries_at", "report_deliveries", ["at"])
    op.create_index("ix_report_deliveries_report", "report_deliveries", ["report"])


def downgrade() -> None:
    op.drop_table("report_deliveries")
    op.drop_index("ix_gpu_samples_at", table_name="gpu_samples")
    with op.batch_alter_table("gpu_samples") as batch:
        batch.drop_column("tenant")
    with op.batch_alter_table("probe_runs") as batch:
        batch.drop_column("log_checked_at")
        batch.drop_column("node_names")
