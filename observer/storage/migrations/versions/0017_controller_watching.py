"""The sources each controller run was set up to read: the reports judge a layer's coverage
from them, never from the presence of its failures. Nullable: runs recorded before it say
nothing, and an older release's code still inserts without it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("controller_runs") as batch:
        batch.add_column(sa.Column("watching", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("controller_runs") as batch:
        batch.drop_column("watching")
