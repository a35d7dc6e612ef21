"""A probe run keeps every attempt the platform ended and queued again (a node failure, a
preemption, a requeue), and when its latest attempt could start.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("probe_runs") as batch:
        batch.add_column(sa.Column("attempts", _JSON, nullable=False, server_default="[]"))
        batch.add_column(sa.Column("eligible_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("probe_runs") as batch:
        batch.drop_column("eligible_at")
        batch.drop_column("attempts")
