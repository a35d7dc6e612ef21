"""Every tenant's finished jobs counted per quarter hour (UTC) by tenant, final phase and
the platform's reason, and how far and how completely each quarter hour was listed.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_listings",
        sa.Column("slot", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("listed_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("note", sa.String(), nullable=False),
    )
    op.create_table(
        "job_tallies",
        sa.Column("slot", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("tenant", sa.String(), primary_key=True),
        sa.Column("phase", sa.String(), primary_key=True),
        sa.Column("reason", sa.String(), primary_key=True),  # "" when the platform gave none
        sa.Column("jobs", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("job_tallies")
    op.drop_table("job_listings")
