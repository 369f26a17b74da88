"""run_index: each job's runs as the runs table and the claims read them, one row a job

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05

The runs table (``query runs``, ``/runs``, ``/api/runs``), the seeds table and the claims read
every run's row, curve rows and notes and checked each run's checksum, to show a dozen numbers
a run: 120,000 curve rows at 10,000 jobs, twice on the home page. The table keeps those
numbers, one packed row a job (``tracker.summary.run_index``, with its own checksum), made when
the job's other derived rows are. The upgrade creates it empty: filling it means today's code,
which a migration does not import. Until ``tracker db upgrade`` (``db rederive``) refills it,
a job without a row is read as before. The downgrade drops it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_index",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("code", sa.String(length=64), nullable=False),
        sa.Column("checksum", sa.BigInteger(), nullable=False),
        sa.Column("runs", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id"),
    )


def downgrade() -> None:
    op.drop_table("run_index")
