"""Why jobs waited: every tenant's own jobs' time pending per slot, tenant and the
scheduler's reason (job_pending, added up snapshot by snapshot); the listed jobs' waits keep
who submitted each (the origin joins job_waits' key: "" for waits kept before, origin not
known); a probe run keeps the user the platform ran it as.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-09
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEFORE = ("slot", "tenant", "wait_seconds")
_AFTER = ("slot", "tenant", "origin", "wait_seconds")
# Rebuilt around its new key as 0008 rebuilt job_tallies: SQLite cannot alter a primary key.
_KEPT = "job_waits_0018"


def upgrade() -> None:
    with op.batch_alter_table("probe_runs") as batch:
        batch.add_column(sa.Column("user", sa.String(), nullable=True))
    op.create_table(
        "job_pending",
        sa.Column("slot", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("tenant", sa.String(), primary_key=True),
        sa.Column("reason", sa.String(), primary_key=True),
        sa.Column("seconds", sa.Float(), nullable=False),
    )
    _rebuild(_AFTER, _BEFORE, "SELECT slot, tenant, '', wait_seconds, jobs FROM " + _KEPT)


def downgrade() -> None:
    before = ", ".join(_BEFORE)
    _rebuild(_BEFORE, _AFTER, f"SELECT {before}, SUM(jobs) FROM {_KEPT} GROUP BY {before}")
    op.drop_table("job_pending")
    with op.batch_alter_table("probe_runs") as batch:
        batch.drop_column("user")


def _rebuild(key: Sequence[str], kept: Sequence[str], put_back: str) -> None:
    """job_waits anew with `key`, its rows (of key `kept`) put back by the SELECT `put_back`
    from the table that kept them."""
    op.create_table(_KEPT, *_columns(kept, keyed=False))
    op.execute(f"INSERT INTO {_KEPT} SELECT {', '.join(kept)}, jobs FROM job_waits")
    op.drop_table("job_waits")
    op.create_table("job_waits", *_columns(key, keyed=True))
    op.execute(f"INSERT INTO job_waits ({', '.join(key)}, jobs) {put_back}")
    op.drop_table(_KEPT)


def _columns(key: Sequence[str], *, keyed: bool) -> list[sa.Column[Any]]:
    types: dict[str, sa.types.TypeEngine[Any]] = {
        "slot": sa.DateTime(timezone=True),
        "tenant": sa.String(),
        "origin": sa.String(),
        "wait_seconds": sa.Integer(),
    }
    return [
        *(sa.Column(name, types[name], primary_key=keyed, nullable=False) for name in key),
        sa.Column("jobs", sa.Integer(), nullable=False),
    ]
