"""curve_chunk.checksum: seeded with the curve's job, arm and metric, not its id alone

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03

A curve row moved to another run (its ``run_id`` changed) kept its chunks' checksums, so one
job's curve read as another's. The checksum's seed is now the xxh3-64 of the curve's job
name, arm and metric (NUL-separated, UTF-8), seeded with the curve's id. The upgrade
recomputes every chunk's checksum so (this step's own code), after checking it against the
old seed, so damage already there stays damage; the downgrade recomputes the old one (the
curve's id alone), checked against the new seed alike.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import xxhash
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

curve_chunk = sa.table(
    "curve_chunk",
    sa.column("curve_id", sa.Integer()),
    sa.column("first_step", sa.BigInteger()),
    sa.column("data", sa.LargeBinary()),
    sa.column("checksum", sa.BigInteger()),
)
curve = sa.table(
    "curve", sa.column("id", sa.Integer()), sa.column("run_id", sa.Integer()), sa.column("metric")
)
run = sa.table(
    "run", sa.column("id", sa.Integer()), sa.column("job_id", sa.Integer()), sa.column("arm")
)
job = sa.table("job", sa.column("id", sa.Integer()), sa.column("name"))


def checksum(data: bytes, seed: int) -> int:
    return int.from_bytes(xxhash.xxh3_64_digest(data, seed=seed), "big", signed=True)


def place_seed(curve_id: int, job_name: str, arm: str, metric: str) -> int:
    place = "\0".join((job_name, arm, metric)).encode("utf-8")
    return xxhash.xxh3_64_intdigest(place, seed=curve_id)


def reseed(to_place: bool) -> None:
    """Every chunk's checksum recomputed for the other seed, where it matched the old one
    (a damaged chunk is left damaged: its checksum is made to mismatch the new seed too)."""
    connection = op.get_bind()
    keys = connection.execute(
        sa.select(curve_chunk.c.curve_id, curve_chunk.c.first_step, job.c.name, run.c.arm)
        .add_columns(curve.c.metric)
        .join(curve, curve.c.id == curve_chunk.c.curve_id)
        .join(run, run.c.id == curve.c.run_id)
        .join(job, job.c.id == run.c.job_id)
    ).all()
    for curve_id, first_step, job_name, arm, metric in keys:  # one chunk in memory at a time
        where = (curve_chunk.c.curve_id == curve_id) & (curve_chunk.c.first_step == first_step)
        data, stored = connection.execute(
            sa.select(curve_chunk.c.data, curve_chunk.c.checksum).where(where)
        ).one()
        seeds = (curve_id, place_seed(curve_id, job_name, arm, metric))
        old, new = seeds if to_place else seeds[::-1]
        fresh = checksum(bytes(data), new)
        if checksum(bytes(data), old) != stored:
            fresh = ~fresh  # damaged before: stays so
        connection.execute(sa.update(curve_chunk).where(where).values(checksum=fresh))


def upgrade() -> None:
    reseed(to_place=True)


def downgrade() -> None:
    reseed(to_place=False)
