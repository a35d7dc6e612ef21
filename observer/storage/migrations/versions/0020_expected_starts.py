"""Expected wait: every job seen waiting with the platform's estimate of its start, first and
last seen (job_estimates: a row when a job first gets one, completed when it starts), and a
probe run's own estimate of its wait at submission (probe_runs.expected_wait_seconds).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-10
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("probe_runs") as batch:
        batch.add_column(sa.Column("expected_wait_seconds", sa.Float(), nullable=True))
    instant = sa.DateTime(timezone=True)
    op.create_table(
        "job_estimates",
        sa.Column("job_id", sa.String(), primary_key=True),
        sa.Column("tenant", sa.String(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("first_expected_start_at", instant, nullable=True),
        sa.Column("first_seen_at", instant, nullable=True),
        sa.Column("last_expected_start_at", instant, nullable=True),
        sa.Column("started_at", instant, nullable=True),
    )
    op.create_index("ix_job_estimates_started_at", "job_estimates", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_job_estimates_started_at", table_name="job_estimates")
    op.drop_table("job_estimates")
    with op.batch_alter_table("probe_runs") as batch:
        batch.drop_column("expected_wait_seconds")
