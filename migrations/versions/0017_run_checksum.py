"""run.checksum: a checksum of each run's row, notes and curve rows, checked by every read

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

A run's val_loss or a curve's last value altered, two arms' names swapped, a note deleted
showed on every page and `tracker db check` found nothing. The upgrade adds the column and
fills it for every run with this file's copy of ``tracker.store.run_rows.run_checksum`` (a
test checks that the two agree), one run at a time; the downgrade drops it.
"""

import json
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


def _exact(value: object) -> object:
    """As the drivers read it back: text as it is, a number or flag as its float's repr,
    -0.0 as 0.0."""
    if value is None or isinstance(value, str):
        return value
    return repr(float(value) + 0.0)  # type: ignore[arg-type]


def _floats(row: Sequence[object], positions: range) -> list[object]:
    """The row with SQLite's text 'NaN' of its float columns (at ``positions``) as the float."""
    return [float(v) if i in positions and v == "NaN" else v for i, v in enumerate(row)]


def run_checksum(
    job_id: int,
    job: str,
    run: Sequence[object],
    curves: Sequence[Sequence[object]],
    notes: Sequence[Sequence[object]],
) -> int:
    document = [
        job,
        [_exact(value) for value in run],
        sorted([_exact(value) for value in curve] for curve in curves),
        [[_exact(value) for value in note] for note in notes],
    ]
    text = json.dumps(document).encode("utf-8")
    return int.from_bytes(xxhash.xxh3_64_digest(text, seed=job_id), "big", signed=True)


def upgrade() -> None:
    op.add_column("run", sa.Column("checksum", sa.BigInteger(), nullable=True))
    connection = op.get_bind()
    runs = connection.exec_driver_sql(
        f"SELECT r.id, r.job_id, j.name, {RUN} FROM run r JOIN job j ON j.id = r.job_id"
    ).all()
    for run_id, job_id, job, *columns in runs:
        curves = connection.exec_driver_sql(
            f"SELECT {CURVE} FROM curve WHERE run_id = {int(run_id)}"
        ).all()
        notes = connection.exec_driver_sql(
            f"SELECT {NOTE} FROM run_note WHERE run_id = {int(run_id)} ORDER BY position"
        ).all()
        run = _floats(columns, range(4, 6))  # val_loss, final_loss
        found = [_floats(curve, range(4, 8)) for curve in curves]  # first to max value
        checksum = run_checksum(job_id, job, run, found, notes)
        connection.exec_driver_sql(f"UPDATE run SET checksum = {checksum} WHERE id = {int(run_id)}")


# Plain ALTER TABLE, no batch copy: on SQLite dropping the old run table would cascade to
# its curves and notes (0011 says more).
def downgrade() -> None:
    op.execute("ALTER TABLE run DROP COLUMN checksum")
