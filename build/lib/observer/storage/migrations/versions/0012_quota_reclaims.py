"""A quota-reclaim probe names the over-quota run whose end its wait is measured from; every
tenant's listed jobs keep their queue waits, per slot, tenant and whole second.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("probe_runs") as batch:
        batch.add_column(sa.Column("reclaims_run_id", sa.String(), nullable=True))
    op.create_table(
        "job_waits",
        sa.Column("slot", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("tenant", sa.String(), primary_key=True),
        sa.Column("wait_seconds", sa.Integer(), primary_key=True),
        sa.Column("jobs", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("job_waits")
    with op.batch_alter_table("probe_runs") as batch:
        batch.drop_column("reclaims_run_id")
