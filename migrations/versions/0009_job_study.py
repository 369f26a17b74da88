"""job.study: the study each job belongs to; job_verdict.known: a KNOWN verdict's reason

Revision ID: 0009
Revises: 0007
Create Date: 2026-12-01

Every job is judged by its own study's expectations (``tracker/studies/NAME.toml``); jobs
stored before belong to the one study there was, ``flashoptim``. A verdict that misses the
paper for a reason its study names (KNOWN) keeps that reason in a column of its own instead
of inside its detail; stored verdicts are refilled by ``tracker db rederive`` (run by
``tracker db upgrade``), so the old rows need no carrying over.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("job") as batch:
        batch.add_column(
            sa.Column("study", sa.String(100), nullable=False, server_default="flashoptim")
        )
    with op.batch_alter_table("job_verdict") as batch:
        batch.add_column(sa.Column("known", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_verdict") as batch:
        batch.drop_column("known")
    with op.batch_alter_table("job") as batch:
        batch.drop_column("study")
