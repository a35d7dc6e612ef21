"""Each queue sample keeps its tenant's guarantee (the nominal GPUs and borrowing limit of the
queues serving it alone), the entitlement the fairness detector weighs it against.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("queue_samples") as batch:
        batch.add_column(sa.Column("nominal_gpus", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("borrowing_limit_gpus", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("queue_samples") as batch:
        batch.drop_column("borrowing_limit_gpus")
        batch.drop_column("nominal_gpus")
