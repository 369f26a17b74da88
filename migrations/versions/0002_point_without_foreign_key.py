"""point: drop the foreign key to curve (bulk loads); points are deleted with their job

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# SQLite names no constraint; batch mode finds it by this naming convention on reflection.
NAMING = {"fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s"}
FOREIGN_KEY = "fk_point_curve_id_curve"
POSTGRES_NAME = "point_curve_id_fkey"


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table(
            "point",
            naming_convention=NAMING,
            table_kwargs={"sqlite_with_rowid": False},
            recreate="always",
        ) as batch:
            batch.drop_constraint(FOREIGN_KEY, type_="foreignkey")
    else:
        op.drop_constraint(POSTGRES_NAME, "point", type_="foreignkey")


def downgrade() -> None:
    # points whose curve is gone would violate the restored key
    op.execute("DELETE FROM point WHERE curve_id NOT IN (SELECT id FROM curve)")
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table(
            "point", table_kwargs={"sqlite_with_rowid": False}, recreate="always"
        ) as batch:
            batch.create_foreign_key(FOREIGN_KEY, "curve", ["curve_id"], ["id"], ondelete="CASCADE")
    else:
        op.create_foreign_key(
            POSTGRES_NAME, "point", "curve", ["curve_id"], ["id"], ondelete="CASCADE"
        )
