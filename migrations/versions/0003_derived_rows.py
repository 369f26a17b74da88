"""job_verdict and job_number: per-job verdicts and derived numbers, kept at ingest

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

Schema only: the rows of jobs already stored are filled after migrating, by today's analysis
(``tracker db rederive``, which ``tracker db upgrade`` runs), so this step never changes as
the analysis does.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# ExactFloat columns: plain Float DDL (as 0001 writes them), the model adds the NaN handling
revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_verdict",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("expectations", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("check", sa.String(length=100), nullable=False),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("measured", sa.Float(), nullable=True),
        sa.Column("expected", sa.Float(), nullable=True),
        sa.Column("tolerance", sa.Float(), nullable=True),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "expectations", "position"),
    )
    op.create_table(
        "job_number",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("expectations", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "expectations", "name"),
    )


def downgrade() -> None:
    op.drop_table("job_number")
    op.drop_table("job_verdict")
