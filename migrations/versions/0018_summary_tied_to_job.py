"""Kept summaries and index curves format 3: their checksum seeded by the job's name

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04

A summary (``job_summary.data``) or a job's smoothed index curves (``job_index.grid_curves``)
moved to another job's row passed its checksum and showed one job's figures as another's.
Format 3 is format 2 (one format byte, the xxh3-64 of the zstandard frame, the frame) with
the checksum seeded by the xxh3-64 of the job's name. The upgrade re-seals every format-2
value, the downgrade unseals it; a value whose checksum does not match is deleted rather than
carried over as intact (``tracker db rederive`` refills it, as after 0013). Each value is one
statement's bytes; no analysis runs.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import xxhash
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = (
    sa.table(
        "job_summary",
        sa.column("job_id", sa.Integer()),
        sa.column("expectations", sa.String(64)),
        sa.column("data", sa.LargeBinary()),
    ),
    sa.table(
        "job_index",
        sa.column("job_id", sa.Integer()),
        sa.column("expectations", sa.String(64)),
        sa.column("grid_curves", sa.LargeBinary()),
    ),
)
JOB = sa.table("job", sa.column("id", sa.Integer()), sa.column("name", sa.String(200)))


def checksum(frame: bytes, job: str | None) -> bytes:
    """Format 3's checksum of ``frame`` for job ``job``; format 2's for None."""
    if job is None:
        return xxhash.xxh3_64_digest(frame)
    return xxhash.xxh3_64_digest(frame, seed=xxhash.xxh3_64_intdigest(job.encode("utf-8")))


def converted(data: bytes, job: str, to_format: int) -> bytes | None:
    """``data`` in ``to_format`` (3: sealed for ``job``, 2: not); None when its checksum in
    the other format does not match."""
    frame = data[9:]
    seeds = (None, job) if to_format == 3 else (job, None)
    if checksum(frame, seeds[0]) != data[1:9]:
        return None
    return bytes([to_format]) + checksum(frame, seeds[1]) + frame


def convert(to_format: int) -> None:
    connection = op.get_bind()
    for table in TABLES:
        value = table.c.data if "data" in table.c else table.c.grid_curves
        keys = connection.execute(
            sa.select(table.c.job_id, table.c.expectations, JOB.c.name).join(
                JOB, JOB.c.id == table.c.job_id
            )
        ).all()
        for job_id, expectations, job in keys:  # one value in memory at a time
            where = (table.c.job_id == job_id) & (table.c.expectations == expectations)
            data = bytes(connection.execute(sa.select(value).where(where)).scalar_one())
            if not data or data[0] != 5 - to_format:
                continue
            made = converted(data, job, to_format)
            if made is None:
                connection.execute(sa.delete(table).where(where))
            else:
                connection.execute(sa.update(table).where(where).values({value.name: made}))


def upgrade() -> None:
    convert(to_format=3)


def downgrade() -> None:
    convert(to_format=2)
