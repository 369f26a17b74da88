"""curve.n_nonfinite: how many of a curve's points are NaN, +inf or -inf, for the runs table

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

The stored curves are counted from their points here, in plain SQL: a NULL point value is NaN
on both backends (see tracker.models); PostgreSQL could also hold a NaN of its own, which
equals NaN there (on SQLite a bound NaN is NULL, so that term matches nothing).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNT = sa.text(
    "UPDATE curve SET n_nonfinite = (SELECT count(*) FROM point WHERE point.curve_id = curve.id"
    " AND (point.value IS NULL OR point.value IN (:inf, :minus_inf, :nan)))"
)


def upgrade() -> None:
    with op.batch_alter_table("curve") as batch:
        batch.add_column(sa.Column("n_nonfinite", sa.Integer(), nullable=True))
    op.get_bind().execute(
        COUNT, {"inf": float("inf"), "minus_inf": float("-inf"), "nan": float("nan")}
    )
    with op.batch_alter_table("curve") as batch:
        batch.alter_column("n_nonfinite", existing_type=sa.Integer(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("curve") as batch:
        batch.drop_column("n_nonfinite")
