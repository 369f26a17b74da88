"""job_verdict and job_number: per-job verdicts and derived numbers, kept at ingest

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

The upgrade fills both tables for every job already stored, analysed against the packaged
expectations by the tracker that upgrades (reading each job's points once).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.orm import Session

from tracker.models import ExactFloat

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
        sa.Column("measured", ExactFloat(), nullable=True),
        sa.Column("expected", ExactFloat(), nullable=True),
        sa.Column("tolerance", ExactFloat(), nullable=True),
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
        sa.Column("value", ExactFloat(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "expectations", "name"),
    )
    from tracker.store.derived import store_packaged_derived

    session = Session(bind=op.get_bind())
    for job_id in session.scalars(sa.text("SELECT id FROM job ORDER BY id")).all():
        store_packaged_derived(session, job_id, with_summary=False)


def downgrade() -> None:
    op.drop_table("job_number")
    op.drop_table("job_verdict")
