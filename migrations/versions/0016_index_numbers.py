"""job_index: each job's verdict counts and smoothed curves on a grid, for the index and the
runs table

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03

The live index read every job's whole summary (a statement and a decompression each) for the
curves of its figures across jobs, and it and the runs table read every kept verdict (and
checked its checksum) to count them: 2,000 statements and 4 s at 1,000 jobs. The table holds
those counts (with their own checksum) and the curves alone, read for all jobs in one
statement. The upgrade creates it empty: filling it means decoding today's summary format,
which a migration does not import. Until ``tracker db upgrade`` (``db rederive``) refills it,
a job without a row is read as before (its verdicts counted, its summary decompressed; still
a statement for all such jobs). The downgrade drops it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_index",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("expectations", sa.String(length=64), nullable=False),
        sa.Column("passed", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("known", sa.Integer(), nullable=False),
        sa.Column("not_applicable", sa.Integer(), nullable=False),
        sa.Column("checksum", sa.BigInteger(), nullable=False),
        sa.Column("grid_curves", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "expectations"),
    )


def downgrade() -> None:
    op.drop_table("job_index")
