"""curve_chunk: curves stored as compressed chunks instead of one point row per step

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

The upgrade converts every point row into chunks and drops ``point``; the downgrade restores
the point rows from the chunks and drops ``curve_chunk``. Both run inside the upgrade's one
transaction (``tracker db upgrade`` copies a SQLite file aside first).

An old revision never runs today's code: this step carries its own copy of chunk format 1
(``tracker.store.codec`` reads it, and a test checks that the two agree byte for byte), so
what it writes stays the same whatever later trackers change.
"""

import struct
from collections.abc import Iterator, Sequence

import numpy as np
import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHUNK_POINTS = 16_384
VERSION = 1
FLOAT, SCALED = 0, 1
MAX_DECIMALS = 12
EXACT_INT = 2**53
HEADER = struct.Struct("<BBI")


def _split(column: np.ndarray) -> bytes:
    return column.view(np.uint8).reshape(-1, 8).T.tobytes()


def _join(data: bytes, n: int) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8).reshape(8, n).T.copy().view(np.int64).ravel()


def _exact(values: np.ndarray, decimals: int) -> np.ndarray | None:
    scale = 10.0**decimals
    rounded = np.round(values * scale)
    if (np.abs(rounded) >= EXACT_INT).any():
        return None
    integers = rounded.astype(np.int64)
    same = np.array_equal((integers / scale).view(np.int64), values.view(np.int64))
    return integers if same else None


def _scaled(values: np.ndarray) -> tuple[int, np.ndarray] | None:
    if not np.isfinite(values).all() or (np.abs(values) >= EXACT_INT).any():
        return None
    for decimals in range(MAX_DECIMALS + 1):
        if _exact(values[:64], decimals) is None:
            continue
        integers = _exact(values, decimals)
        if integers is not None:
            return decimals, integers
    return None


def encode(steps: np.ndarray, values: np.ndarray) -> bytes:
    """Chunk format 1, as ``tracker.store.codec.encode`` wrote it when this step was made."""
    steps = np.ascontiguousarray(steps, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    found = _scaled(values)
    if found is None:
        header = HEADER.pack(FLOAT, 0, len(values))
        column = values.view(np.int64)
    else:
        header = HEADER.pack(SCALED, found[0], len(values))
        column = np.diff(found[1], prepend=np.int64(0))
    body = header + _split(np.diff(steps, prepend=np.int64(0))) + _split(column)
    return bytes([VERSION]) + zstandard.ZstdCompressor(level=3).compress(body)


def decode(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    if data[0] != VERSION:
        raise ValueError(f"curve chunk format {data[0]}: written after revision 0007")
    body = zstandard.ZstdDecompressor().decompress(bytes(data[1:]))
    encoding, decimals, n = HEADER.unpack_from(body)
    size = 8 * n
    steps = np.cumsum(_join(body[HEADER.size : HEADER.size + size], n))
    column = _join(body[HEADER.size + size :], n)
    if encoding == SCALED:
        return steps, np.cumsum(column).astype(np.float64) / 10.0**decimals
    return steps, column.view(np.float64)


def chunks(curve_id: int, steps: np.ndarray, values: np.ndarray) -> Iterator[dict[str, object]]:
    for start in range(0, len(steps), CHUNK_POINTS):
        part_steps = steps[start : start + CHUNK_POINTS]
        part_values = values[start : start + CHUNK_POINTS]
        finite = part_values[np.isfinite(part_values)]
        yield {
            "curve_id": curve_id,
            "first_step": int(part_steps[0]),
            "last_step": int(part_steps[-1]),
            "n_points": len(part_steps),
            "min_value": float(finite.min()) if len(finite) else None,
            "max_value": float(finite.max()) if len(finite) else None,
            "data": encode(part_steps, part_values),
        }


curve = sa.table("curve", sa.column("id", sa.Integer()))
point = sa.table(
    "point",
    sa.column("curve_id", sa.Integer()),
    sa.column("step", sa.BigInteger()),
    sa.column("value", sa.Float()),
)
curve_chunk = sa.table(
    "curve_chunk",
    sa.column("curve_id", sa.Integer()),
    sa.column("first_step", sa.BigInteger()),
    sa.column("last_step", sa.BigInteger()),
    sa.column("n_points", sa.Integer()),
    sa.column("min_value", sa.Float()),
    sa.column("max_value", sa.Float()),
    sa.column("data", sa.LargeBinary()),
)


def _curve_ids(connection: sa.Connection) -> list[int]:
    return list(connection.execute(sa.select(curve.c.id).order_by(curve.c.id)).scalars())


def upgrade() -> None:
    op.create_table(
        "curve_chunk",
        sa.Column("curve_id", sa.Integer(), nullable=False),
        sa.Column("first_step", sa.BigInteger(), nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=False),
        sa.Column("n_points", sa.Integer(), nullable=False),
        sa.Column("min_value", sa.Float(), nullable=True),
        sa.Column("max_value", sa.Float(), nullable=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["curve_id"], ["curve.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("curve_id", "first_step"),
    )
    connection = op.get_bind()
    for curve_id in _curve_ids(connection):  # points of a deleted curve (no key) are dropped
        rows = connection.execute(
            sa.select(point.c.step, point.c.value)
            .where(point.c.curve_id == curve_id)
            .order_by(point.c.step)
        ).all()
        if not rows:
            continue
        # a NULL value is NaN (what the point table meant by it on both backends)
        steps = np.array([step for step, _ in rows], dtype=np.int64)
        values = np.array([np.nan if v is None else v for _, v in rows], dtype=np.float64)
        connection.execute(sa.insert(curve_chunk), list(chunks(curve_id, steps, values)))
    op.drop_table("point")


def downgrade() -> None:
    op.create_table(  # as revision 0002 left it: no foreign key, WITHOUT ROWID on SQLite
        "point",
        sa.Column("curve_id", sa.Integer(), primary_key=True),
        sa.Column("step", sa.BigInteger(), primary_key=True),
        sa.Column("value", sa.Float()),
        sqlite_with_rowid=False,
    )
    connection = op.get_bind()
    for curve_id in _curve_ids(connection):
        stored = connection.execute(
            sa.select(curve_chunk.c.data)
            .where(curve_chunk.c.curve_id == curve_id)
            .order_by(curve_chunk.c.first_step)
        ).scalars()
        for data in stored:
            steps, values = decode(data)
            connection.execute(
                sa.insert(point),
                [
                    {"curve_id": curve_id, "step": int(s), "value": None if v != v else float(v)}
                    for s, v in zip(steps.tolist(), values.tolist(), strict=True)
                ],
            )
    op.drop_table("curve_chunk")
