"""run.checksum: a checksum of each run's row, notes and curve rows, checked by every read

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

A run's val_loss or a curve's last value altered, two arms' names swapped, a note deleted
showed on every page and `tracker db check` found nothing. The upgrade adds the column and
fills it for every run with this file's copy of ``tracker.store.run_rows.run_checksum`` and
of its statements (``tests/test_migrations.py`` checks that the checksums are an ingest's), one
run at a time; the downgrade drops it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import xxhash
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUN = "r.arm, r.model, r.variant, r.seed, r.val_loss, r.final_loss, r.diverged, r.extra"
CURVE = (
    "metric, n_points, first_step, last_step, first_value, last_value, min_value, max_value,"
    " n_nonfinite"
)
NOTE = "position, kind, text, first_step, last_step, count"


def run_checksum(
    job_id: int,
    job: str,
    run: tuple[object, ...],
    curves: list[tuple[object, ...]],
    notes: list[tuple[object, ...]],
) -> int:
    """The xxh3-64 (signed) of the run's rows as the driver reads them, seeded with its job."""
    text = repr((job, run, sorted(curves), tuple(notes))).encode("utf-8")
    return int.from_bytes(xxhash.xxh3_64_digest(text, seed=job_id), "big", signed=True)


def upgrade() -> None:
    op.add_column("run", sa.Column("checksum", sa.BigInteger(), nullable=True))
    connection = op.get_bind()
    runs = connection.exec_driver_sql(
        f"SELECT r.id, r.job_id, j.name, {RUN} FROM run r JOIN job j ON j.id = r.job_id"
    ).all()
    for run_id, job_id, job, *columns in runs:
        where = f"WHERE run_id = {int(run_id)}"
        curves = connection.exec_driver_sql(f"SELECT {CURVE} FROM curve {where}").all()
        notes = connection.exec_driver_sql(
            f"SELECT {NOTE} FROM run_note {where} ORDER BY position"
        ).all()
        checksum = run_checksum(
            job_id, job, tuple(columns), [tuple(c) for c in curves], [tuple(n) for n in notes]
        )
        connection.exec_driver_sql(f"UPDATE run SET checksum = {checksum} WHERE id = {int(run_id)}")


# Plain ALTER TABLE, no batch copy: on SQLite dropping the old run table would cascade to
# its curves and notes (0011 says more).
def downgrade() -> None:
    op.execute("ALTER TABLE run DROP COLUMN checksum")
