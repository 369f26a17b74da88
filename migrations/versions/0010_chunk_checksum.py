"""curve_chunk.checksum: every chunk's xxh3-64, seeded with its curve's id, checked on read

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

The upgrade computes the checksum of every stored chunk as it is (this step's own code: the
xxh3-64 of the chunk's bytes with the curve's id as the seed, as a signed 64-bit integer),
so chunks stored before read back as they did; the downgrade drops the column.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import xxhash
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

curve_chunk = sa.table(
    "curve_chunk",
    sa.column("curve_id", sa.Integer()),
    sa.column("first_step", sa.BigInteger()),
    sa.column("data", sa.LargeBinary()),
    sa.column("checksum", sa.BigInteger()),
)


def checksum(data: bytes, curve_id: int) -> int:
    return int.from_bytes(xxhash.xxh3_64_digest(data, seed=curve_id), "big", signed=True)


def upgrade() -> None:
    with op.batch_alter_table("curve_chunk") as batch:
        batch.add_column(sa.Column("checksum", sa.BigInteger(), nullable=True))
    connection = op.get_bind()
    keys = connection.execute(sa.select(curve_chunk.c.curve_id, curve_chunk.c.first_step)).all()
    for curve_id, first_step in keys:  # one chunk in memory at a time
        where = (curve_chunk.c.curve_id == curve_id) & (curve_chunk.c.first_step == first_step)
        data = connection.execute(sa.select(curve_chunk.c.data).where(where)).scalar_one()
        connection.execute(
            sa.update(curve_chunk).where(where).values(checksum=checksum(bytes(data), curve_id))
        )
    with op.batch_alter_table("curve_chunk") as batch:
        batch.alter_column("checksum", existing_type=sa.BigInteger(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("curve_chunk") as batch:
        batch.drop_column("checksum")
