"""Each GPU sample says what kind of task held the GPU (a probe's name, or "job" for a
tenant's own), and the per-tenant-hour counts are kept per task too: gpu_task_hours replaces
gpu_tenant_hours. Counts made before have no task ("": not known); going back adds up each
hour's tasks of a tenant.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_PERCENTS = ", ".join(f"p{p}" for p in range(101))


def upgrade() -> None:
    with op.batch_alter_table("gpu_samples") as batch:
        batch.add_column(sa.Column("task", sa.String(), nullable=True))
    op.create_table("gpu_task_hours", *_columns("hour", "tenant", "task"))
    op.execute(
        f"INSERT INTO gpu_task_hours (hour, tenant, task, {_PERCENTS}) "
        f"SELECT hour, tenant, '', {_PERCENTS} FROM gpu_tenant_hours"
    )
    op.drop_table("gpu_tenant_hours")


def downgrade() -> None:
    op.create_table("gpu_tenant_hours", *_columns("hour", "tenant"))
    sums = ", ".join(f"SUM(p{p})" for p in range(101))
    op.execute(
        f"INSERT INTO gpu_tenant_hours (hour, tenant, {_PERCENTS}) "
        f"SELECT hour, tenant, {sums} FROM gpu_task_hours GROUP BY hour, tenant"
    )
    op.drop_table("gpu_task_hours")
    with op.batch_alter_table("gpu_samples") as batch:
        batch.drop_column("task")


def _columns(hour: str, *words: str) -> list[sa.Column[Any]]:
    return [
        sa.Column(hour, sa.DateTime(timezone=True), primary_key=True),
        *(sa.Column(word, sa.String(), primary_key=True) for word in words),
        *(sa.Column(f"p{p}", sa.Integer(), nullable=False) for p in range(101)),
    ]
