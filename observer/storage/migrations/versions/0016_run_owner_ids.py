"""A probe run keeps the owner ids of its GPU processes, as the platform gave them: the
failure causes tell the run's GPUs by them.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("probe_runs") as batch:
        batch.add_column(sa.Column("owner_ids", _JSON, nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("probe_runs") as batch:
        batch.drop_column("owner_ids")
