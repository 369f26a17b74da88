"""job_summary.data format 2: a checksum of the compressed summary, checked on every read

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03

A flipped bit in a kept summary that still decompressed changed a job page's figure. Format 2
is format 1 (one format byte, then the zstandard frame of the JSON document) with the
xxh3-64 of the frame (8 bytes) between the two. The upgrade adds it to every summary of
format 1, the downgrade takes it out again (a summary whose checksum does not match is
deleted rather than carried over as intact: ``tracker db rederive`` refills it). Each row is
one statement's bytes; no analysis runs.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import xxhash
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

summary = sa.table(
    "job_summary",
    sa.column("job_id", sa.Integer()),
    sa.column("expectations", sa.String(64)),
    sa.column("data", sa.LargeBinary()),
)


def with_checksum(data: bytes) -> bytes:
    """Format 1's bytes in format 2."""
    frame = data[1:]
    return bytes([2]) + xxhash.xxh3_64_digest(frame) + frame


def without_checksum(data: bytes) -> bytes | None:
    """Format 2's bytes in format 1; None when its checksum does not match."""
    frame = data[9:]
    return bytes([1]) + frame if xxhash.xxh3_64_digest(frame) == data[1:9] else None


def convert(from_format: int) -> None:
    connection = op.get_bind()
    keys = connection.execute(sa.select(summary.c.job_id, summary.c.expectations)).all()
    for job_id, expectations in keys:  # one summary in memory at a time
        where = (summary.c.job_id == job_id) & (summary.c.expectations == expectations)
        data = bytes(connection.execute(sa.select(summary.c.data).where(where)).scalar_one())
        if not data or data[0] != from_format:
            continue
        converted = with_checksum(data) if from_format == 1 else without_checksum(data)
        if converted is None:
            connection.execute(sa.delete(summary).where(where))
        else:
            connection.execute(sa.update(summary).where(where).values(data=converted))


def upgrade() -> None:
    convert(from_format=1)


def downgrade() -> None:
    convert(from_format=2)
