"""Every tenant's failed jobs counted by their cause too, and the observer's own probes
apart from the tenants' jobs: the cause and the origin join the key of job_tallies. Tallies
made before have neither ("": no cause, as a job that did not fail; no origin known); going
back adds up the tallies that differed by them alone.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BEFORE = ("slot", "tenant", "phase", "reason")
_AFTER = (*_BEFORE, "cause", "origin")
# The table is built anew around its new key, its rows kept meanwhile in a table without
# one: SQLite cannot alter a primary key, and a keyed copy would keep its own key's name on
# PostgreSQL.
_KEPT = "job_tallies_0008"


def upgrade() -> None:
    _rebuild(_AFTER, _BEFORE, f"SELECT {', '.join(_BEFORE)}, '', '', jobs FROM {_KEPT}")


def downgrade() -> None:
    before = ", ".join(_BEFORE)
    _rebuild(_BEFORE, _AFTER, f"SELECT {before}, SUM(jobs) FROM {_KEPT} GROUP BY {before}")


def _rebuild(key: Sequence[str], kept: Sequence[str], put_back: str) -> None:
    """job_tallies anew with `key`, its rows (of key `kept`) put back by the SELECT
    `put_back` from the table that kept them."""
    op.create_table(_KEPT, *_columns(kept, keyed=False))
    op.execute(f"INSERT INTO {_KEPT} SELECT {', '.join(kept)}, jobs FROM job_tallies")
    op.drop_table("job_tallies")
    op.create_table("job_tallies", *_columns(key, keyed=True))
    op.execute(f"INSERT INTO job_tallies ({', '.join(key)}, jobs) {put_back}")
    op.drop_table(_KEPT)


def _columns(key: Sequence[str], *, keyed: bool) -> list[sa.Column[Any]]:
    slot, *words = key
    return [
        sa.Column(slot, sa.DateTime(timezone=True), primary_key=keyed, nullable=False),
        *(sa.Column(word, sa.String(), primary_key=keyed, nullable=False) for word in words),
        sa.Column("jobs", sa.Integer(), nullable=False),
    ]
