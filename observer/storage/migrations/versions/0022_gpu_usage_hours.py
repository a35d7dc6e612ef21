"""Who used what: each GPU sample keeps the type of task that held the GPU ("probe", or the
tenant's job's type from reports.task_types), and the samples attributed to a tenant are
counted as they are stored per hour, node, tenant and task type (samples, utilisation summed,
idle) and per hour, tenant and GiB of memory used: the GPU-hours and memory of a soak longer
than the raw samples are kept. Hours stored before have no counts; nothing is made up for them.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("gpu_samples") as batch:
        batch.add_column(sa.Column("task_type", sa.String(), nullable=True))
    op.create_table(
        "gpu_usage_hours",
        sa.Column("hour", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("node", sa.String(), primary_key=True),
        sa.Column("tenant", sa.String(), primary_key=True),
        sa.Column("task_type", sa.String(), primary_key=True),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("busy_percent", sa.BigInteger(), nullable=False),
        sa.Column("idle_samples", sa.Integer(), nullable=False),
    )
    op.create_table(
        "gpu_memory_hours",
        sa.Column("hour", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("tenant", sa.String(), primary_key=True),
        sa.Column("gib", sa.Integer(), primary_key=True),
        sa.Column("samples", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gpu_memory_hours")
    op.drop_table("gpu_usage_hours")
    with op.batch_alter_table("gpu_samples") as batch:
        batch.drop_column("task_type")
