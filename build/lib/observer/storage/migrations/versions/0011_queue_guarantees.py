"""Each queue sample keeps its tenant's guarantee (the nominal GPUs and borrowing limit of the
queues serving it alone), the entitlement the fairness detector weighs it against, and whose
running GPUs it counts by priority (Slurm QOS, priorityClassName) and by user: who took the
GPUs in a stretch of unfairness. Older samples count nobody.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_BY = ("running_gpus_by_priority", "running_gpus_by_user")


def upgrade() -> None:
    with op.batch_alter_table("queue_samples") as batch:
        batch.add_column(sa.Column("nominal_gpus", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("borrowing_limit_gpus", sa.Integer(), nullable=True))
        for name in _BY:
            batch.add_column(sa.Column(name, _JSON, nullable=False, server_default=sa.text("'{}'")))


def downgrade() -> None:
    with op.batch_alter_table("queue_samples") as batch:
        for name in _BY:
            batch.drop_column(name)
        batch.drop_column("borrowing_limit_gpus")
        batch.drop_column("nominal_gpus")
