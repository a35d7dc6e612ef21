"""The store's size as the controller measures it each hour, for its growth per day.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "store_sizes",
        sa.Column("at", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("store_sizes")
