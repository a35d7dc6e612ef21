"""GPU samples counted as they are stored: per UTC minute for the whole fleet, per UTC hour
per node and per tenant, one column per utilisation percent. Reports read these instead of
counting a soak's millions of samples again; the samples of an older database are counted
here once.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_PERCENTS = range(101)  # NVML reports whole percent; readings outside 0..100 count at the ends


def _percent_columns() -> list[sa.Column[int]]:
    return [sa.Column(f"p{p}", sa.Integer(), nullable=False) for p in _PERCENTS]


def upgrade() -> None:
    op.create_table(
        "gpu_minutes",
        sa.Column("minute", sa.DateTime(timezone=True), primary_key=True),
        *_percent_columns(),
    )
    op.create_table(
        "gpu_node_hours",
        sa.Column("hour", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("node", sa.String(), primary_key=True),
        sa.Column("unread", sa.Integer(), nullable=False),
        *_percent_columns(),
    )
    op.create_table(
        "gpu_tenant_hours",
        sa.Column("hour", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("tenant", sa.String(), primary_key=True),
        *_percent_columns(),
    )
    _count_stored_samples()


def _count_stored_samples() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        minute = "date_trunc('minute', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
        hour = "date_trunc('hour', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
    else:  # instants are UTC text, 'YYYY-MM-DD HH:MM:SS.ffffff' (colons escaped for text())
        minute = r"substr(at, 1, 16) || '\:00.000000'"
        hour = r"substr(at, 1, 13) || '\:00\:00.000000'"
    percent = "utilization_gpu_percent"
    names = ", ".join(f"p{p}" for p in _PERCENTS)
    sums = ", ".join(
        f"sum(CASE WHEN {percent} {'<=' if p == 0 else '>=' if p == 100 else '='} {p} "
        "THEN 1 ELSE 0 END)"
        for p in _PERCENTS
    )
    op.execute(
        f"INSERT INTO gpu_minutes (minute, {names}) SELECT {minute}, {sums} FROM gpu_samples "
        f"WHERE {percent} IS NOT NULL GROUP BY {minute}"
    )
    op.execute(
        f"INSERT INTO gpu_node_hours (hour, node, unread, {names}) SELECT {hour}, node, "
        f"sum(CASE WHEN {percent} IS NULL THEN 1 ELSE 0 END), {sums} FROM gpu_samples "
        f"GROUP BY {hour}, node"
    )
    op.execute(
        f"INSERT INTO gpu_tenant_hours (hour, tenant, {names}) SELECT {hour}, tenant, {sums} "
        f"FROM gpu_samples WHERE {percent} IS NOT NULL AND tenant IS NOT NULL "
        f"GROUP BY {hour}, tenant"
    )


def downgrade() -> None:
    op.drop_table("gpu_tenant_hours")
    op.drop_table("gpu_node_hours")
    op.drop_table("gpu_minutes")
