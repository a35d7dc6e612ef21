"""The probe launches the controller skipped (over budget, no other tenant, the platform
unreachable), so that the reports show each probe's coverage.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Spelled out here rather than imported from tables.py: a migration must keep meaning what
# it meant when it was written.
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "probe_skips",
        sa.Column("id", _BIG_ID, primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("probe", sa.String(), nullable=False),
        sa.Column("tenant", sa.String(), nullable=False),
        sa.Column("window", sa.String(), nullable=True),
        sa.Column("reason", sa.String(), nullable=False),
    )
    op.create_index("ix_probe_skips_at", "probe_skips", ["at"])


def downgrade() -> None:
    op.drop_table("probe_skips")
