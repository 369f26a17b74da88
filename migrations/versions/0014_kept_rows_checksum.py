"""job_summary.rows_checksum: a checksum of the job's stored verdicts and numbers, checked by
every read of them

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03

A stored verdict changed from PASS to FAIL changed claims, the report and the runs table
silently. The column is nullable: rows kept before have none and are read as not kept (a
job's verdicts are then analysed afresh, as for rows of an older analysis) until
``tracker db upgrade`` (``db rederive``) rebuilds them; the downgrade drops it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("job_summary", sa.Column("rows_checksum", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_summary") as batch:
        batch.drop_column("rows_checksum")
