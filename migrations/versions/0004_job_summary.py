"""job_summary: what a job's pages draw from its points, kept at ingest

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

Schema only: the rows of jobs already stored are filled after migrating, by today's analysis
(``tracker db rederive``, which ``tracker db upgrade`` runs). Jobs without a row (other
expectations) are summarised from their points when shown.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_summary",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("expectations", sa.String(length=64), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "expectations"),
    )


def downgrade() -> None:
    op.drop_table("job_summary")
