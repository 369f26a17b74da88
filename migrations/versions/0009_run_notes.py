"""run_note: what ingest settled or found in each arm's files, kept with the run

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

One row per note, in the order ingest wrote them: a kind (text, so that a new kind needs no
migration), the sentence shown, and where it applies (steps, a count). Jobs stored before
have no notes until they are ingested again (``--replace``): their files are not re-read here.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_note",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("first_step", sa.BigInteger(), nullable=True),
        sa.Column("last_step", sa.BigInteger(), nullable=True),
        sa.Column("count", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "position"),
    )


def downgrade() -> None:
    op.drop_table("run_note")
