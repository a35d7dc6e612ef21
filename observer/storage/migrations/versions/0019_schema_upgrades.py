"""Which release migrated the store: a row per release that ran `observer db upgrade`, so an
older release rolled back to it can name the one to go back to instead of crash-looping.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "schema_upgrades",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("revision", sa.String(), nullable=False),
        sa.Column("helm_release", sa.String(), nullable=True),
        sa.Column("helm_namespace", sa.String(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("schema_upgrades")
