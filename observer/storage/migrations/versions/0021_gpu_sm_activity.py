"""GPM's SM activity kept with each GPU sample (whole percent; None, never 0, where the GPU
gave none) and whether the GPU has GPM, counted as utilisation is: per UTC minute, per node
hour (with the samples of GPUs without GPM) and per tenant, task and hour. Samples stored
before have neither: their node hours are kept with no SM activity counted, so that the
nodes sampled are the same whichever counts a report reads.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_PERCENTS = range(101)


def upgrade() -> None:
    with op.batch_alter_table("gpu_samples") as batch:
        batch.add_column(sa.Column("sm_active_percent", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("gpm_supported", sa.Boolean(), nullable=True))
    op.create_table("gpu_sm_minutes", *_columns("minute"))
    op.create_table(
        "gpu_sm_node_hours",
        *_columns("hour", "node", unread=True),
    )
    names = ", ".join(f"p{p}" for p in _PERCENTS)
    zeros = ", ".join("0" for _ in _PERCENTS)
    op.execute(
        f"INSERT INTO gpu_sm_node_hours (hour, node, unread, {names}) "
        f"SELECT hour, node, 0, {zeros} FROM gpu_node_hours"
    )
    op.create_table("gpu_sm_task_hours", *_columns("hour", "tenant", "task"))


def downgrade() -> None:
    op.drop_table("gpu_sm_task_hours")
    op.drop_table("gpu_sm_node_hours")
    op.drop_table("gpu_sm_minutes")
    with op.batch_alter_table("gpu_samples") as batch:
        batch.drop_column("gpm_supported")
        batch.drop_column("sm_active_percent")


def _columns(at: str, *words: str, unread: bool = False) -> list[sa.Column[Any]]:
    return [
        sa.Column(at, sa.DateTime(timezone=True), primary_key=True),
        *(sa.Column(word, sa.String(), primary_key=True) for word in words),
        *([sa.Column("unread", sa.Integer(), nullable=False)] if unread else []),
        *(sa.Column(f"p{p}", sa.Integer(), nullable=False) for p in _PERCENTS),
    ]
