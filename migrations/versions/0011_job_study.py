"""job.study: the study each job belongs to; job_verdict.known: a KNOWN verdict's reason

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01

Every job is judged by its own study's expectations (``tracker/studies/NAME.toml``); jobs
stored before belong to the one study there was, ``flashoptim``. A verdict that misses the
paper for a reason its study names (KNOWN) keeps that reason in a column of its own instead
of inside its detail. The kept derived rows (verdicts, numbers, summaries) are dropped, not
carried over: ``tracker db upgrade`` refills them by today's analysis (``db rederive``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, no batch copy of the tables: on SQLite a batch rebuilds the table, and
# dropping the old job table would cascade to every row that references it (SQLite has had
# ADD and DROP COLUMN since 3.35).
def upgrade() -> None:
    op.add_column(
        "job", sa.Column("study", sa.String(100), nullable=False, server_default="flashoptim")
    )
    op.add_column("job_verdict", sa.Column("known", sa.Text(), nullable=True))
    for table in ("job_verdict", "job_number", "job_summary"):
        op.execute(f"DELETE FROM {table}")


def downgrade() -> None:
    for table, column in (("job_verdict", "known"), ("job", "study")):
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
