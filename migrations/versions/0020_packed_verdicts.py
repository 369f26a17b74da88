"""Kept verdicts packed: a job's verdicts as columns in one ``job_verdicts`` row

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05

A page across 10,000 jobs read a million ``job_verdict`` rows and made each one's text to
check its job's checksum: seconds. ``job_verdicts`` keeps a job's verdicts in one row, as
packed little-endian columns (key ids, measured values, tolerances, what is absent, the ends
of each verdict's figures, the figures), and the job's checksum is of those bytes and of its
keys' digests (``tracker.store.packed_verdicts``). The upgrade converts every job whose rows
still match their old checksum (a job whose rows do not keeps them, with no checksum: read
as never kept, until ``db rederive`` rebuilds it); the downgrade the other way. No analysis
runs; the functions below are this revision's own copies.
"""

import json
import math
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import sqlalchemy as sa
import xxhash
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PLACEHOLDER = "\x1f"
ALPHABET = "0123456789. "
PAD = 15
JOBS_A_STEP = 200  # jobs converted a statement: bounded memory on a large database
ABSENT_MEASURED, ABSENT_TOLERANCE, ABSENT_FIGURES = 1, 2, 4
PACKED = ("keys", "measured", "tolerance", "absent", "figure_ends", "figures")
KEY = ("check", "subject", "expected", "status", "known", "detail_template")
ROW = ("job_id", "position", "key_id", "measured", "tolerance", "figures")


def plain(name: str, columns: Sequence[str]) -> sa.TableClause:
    return sa.table(name, *(sa.column(c) for c in columns))


def number(value: object) -> float | None:
    """A float column's value as the driver gave it (SQLite's text 'NaN' too) as a float."""
    return None if value is None else float(value)


def stored_float(value: float | None) -> object:
    """A float as the old column kept it: NaN as the text 'NaN' on SQLite."""
    if value is not None and math.isnan(value) and op.get_bind().dialect.name == "sqlite":
        return "NaN"
    return value


def joined_detail(template: str, figures: bytes | None) -> str:
    if figures is None:
        return template
    codes = [code for byte in figures for code in (byte >> 4, byte & 15) if code != PAD]
    numbers = "".join(ALPHABET[code] for code in codes).split(" ")
    parts = template.split(PLACEHOLDER)
    return "".join(part + number for part, number in zip(parts, numbers, strict=False)) + parts[-1]


def exact(value: object) -> object:
    if isinstance(value, str) or value is None:
        return value
    return repr(float(value) + 0.0)


def old_checksum(
    job_id: int, digest: str, rows: list[tuple[object, ...]], numbers: Mapping[str, object]
) -> int:
    """0014-0019's: of the JSON of the digest, each verdict's (check, subject, measured,
    expected, tolerance, status, detail, known) and the sorted numbers."""
    named = sorted((name, exact(value)) for name, value in numbers.items())
    document = [digest, [[exact(value) for value in row] for row in rows], named]
    text = json.dumps(document).encode("utf-8")
    return int.from_bytes(xxhash.xxh3_64_digest(text, seed=job_id), "big", signed=True)


def new_checksum(
    job_id: int,
    digest: str,
    key_digests: bytes,
    packed: Sequence[bytes],
    numbers: Mapping[str, object],
) -> int:
    """This revision's (``tracker.store.packed_verdicts.rows_checksum``)."""
    hasher = xxhash.xxh3_64(seed=job_id)
    named = sorted(
        (name, None if v is None else repr(float(v) + 0.0)) for name, v in numbers.items()
    )
    for part in (digest.encode(), key_digests, *packed[1:], json.dumps(named).encode()):
        hasher.update(len(part).to_bytes(8, "little"))
        hasher.update(part)
    return int.from_bytes(hasher.digest(), "big", signed=True)


def pack(rows: list[tuple[int, float | None, float | None, bytes | None]]) -> list[bytes]:
    """(key id, measured, tolerance, figures) of a job's verdicts as its packed columns."""
    absent = bytes(
        (m is None) * ABSENT_MEASURED
        + (t is None) * ABSENT_TOLERANCE
        + (f is None) * ABSENT_FIGURES
        for _, m, t, f in rows
    )
    floats = [
        np.array([np.nan if row[i] is None else row[i] for row in rows], "<f8") for i in (1, 2)
    ]
    ends = np.cumsum([len(row[3] or b"") for row in rows], dtype=np.int64).astype("<i4")
    return [
        np.array([row[0] for row in rows], "<i4").tobytes(),
        floats[0].tobytes(),
        floats[1].tobytes(),
        absent,
        ends.tobytes(),
        b"".join(row[3] or b"" for row in rows),
    ]


def unpack(packed: Sequence[bytes]) -> list[tuple[int, float | None, float | None, bytes | None]]:
    keys, measured, tolerance, absent, ends, figures = packed
    ids = np.frombuffer(keys, "<i4").tolist()
    values = np.frombuffer(measured, "<f8").tolist()
    limits = np.frombuffer(tolerance, "<f8").tolist()
    stops = np.frombuffer(ends, "<i4").tolist()
    rows = []
    for i, key_id in enumerate(ids):
        start = stops[i - 1] if i else 0
        rows.append(
            (
                key_id,
                None if absent[i] & ABSENT_MEASURED else values[i],
                None if absent[i] & ABSENT_TOLERANCE else limits[i],
                None if absent[i] & ABSENT_FIGURES else figures[start : stops[i]],
            )
        )
    return rows


def jobs_kept() -> Iterator[tuple[list[int], dict[int, tuple[str, int | None]]]]:
    """Every job with kept rows, ``JOBS_A_STEP`` at a time: its digest and rows checksum."""
    connection = op.get_bind()
    query = sa.text("SELECT job_id, expectations, rows_checksum FROM job_summary ORDER BY job_id")
    summaries = {job_id: (digest, kept) for job_id, digest, kept in connection.execute(query)}
    jobs = sorted(summaries)
    for start in range(0, len(jobs), JOBS_A_STEP):
        step = jobs[start : start + JOBS_A_STEP]
        yield step, {job_id: summaries[job_id] for job_id in step}


def numbers_of(jobs: list[int]) -> dict[tuple[int, str], dict[str, object]]:
    numbers = plain("job_number", ("job_id", "expectations", "name", "value"))
    found: dict[tuple[int, str], dict[str, object]] = {}
    query = sa.select(numbers).where(numbers.c.job_id.in_(jobs))
    for job_id, digest, name, value in op.get_bind().execute(query):
        found.setdefault((job_id, digest), {})[name] = value
    return found


def keys_of(key_ids: set[int]) -> dict[int, tuple[bytes, tuple[object, ...]]]:
    keys = plain("verdict_key", ("id", "digest", *KEY))
    query = sa.select(keys).where(keys.c.id.in_(sorted(key_ids)))
    return {row[0]: (bytes(row[1]), tuple(row[2:])) for row in op.get_bind().execute(query)}


def set_checksum(job_id: int, checksum: int | None) -> None:
    summaries = plain("job_summary", ("job_id", "rows_checksum"))
    op.get_bind().execute(
        sa.update(summaries).where(summaries.c.job_id == job_id).values(rows_checksum=checksum)
    )


def old_rows(
    rows: list[tuple[int, float | None, float | None, bytes | None]],
    keys: Mapping[int, tuple[bytes, tuple[object, ...]]],
) -> list[tuple[object, ...]] | None:
    """A job's verdicts as 0019's checksum covers them; None if a key is missing."""
    found = []
    for key_id, measured, tolerance, figures in rows:
        if key_id not in keys:
            return None
        check, subject, expected, status, known, template = keys[key_id][1]
        text = joined_detail(template, figures)
        found.append((check, subject, measured, number(expected), tolerance, status, text, known))
    return found


def upgrade() -> None:
    op.create_table(
        "job_verdicts",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.LargeBinary(), nullable=False) for name in PACKED),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id"),
    )
    connection = op.get_bind()
    old = plain("job_verdict", ROW)
    new = plain("job_verdicts", ("job_id", "count", *PACKED))
    for jobs, summaries in jobs_kept():
        query = sa.select(old).where(old.c.job_id.in_(jobs)).order_by("job_id", "position")
        by_job: dict[int, list[tuple[int, float | None, float | None, bytes | None]]] = {}
        for job_id, _, key_id, measured, tolerance, figures in connection.execute(query):
            figures = None if figures is None else bytes(figures)
            by_job.setdefault(job_id, []).append(
                (key_id, number(measured), number(tolerance), figures)
            )
        keys = keys_of({row[0] for rows in by_job.values() for row in rows})
        numbers = numbers_of(jobs)
        packed_rows = []
        for job_id in jobs:
            rows = by_job.get(job_id, [])
            packed = pack(rows)
            packed_rows.append(
                {"job_id": job_id, "count": len(rows), **dict(zip(PACKED, packed, strict=True))}
            )
            digest, kept = summaries[job_id]
            own = numbers.get((job_id, digest), {})
            verdicts = old_rows(rows, keys)
            intact = (
                verdicts is not None
                and kept is not None
                and old_checksum(job_id, digest, verdicts, own) == kept
            )
            key_digests = b"".join(keys[row[0]][0] for row in rows) if intact else b""
            set_checksum(
                job_id, new_checksum(job_id, digest, key_digests, packed, own) if intact else None
            )
        if packed_rows:
            connection.execute(sa.insert(new), packed_rows)
    op.drop_table("job_verdict")


def downgrade() -> None:
    op.create_table(
        "job_verdict",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("key_id", sa.Integer(), nullable=False),
        sa.Column("measured", sa.Float(), nullable=True),
        sa.Column("tolerance", sa.Float(), nullable=True),
        sa.Column("figures", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "position"),
        sqlite_with_rowid=False,
    )
    connection = op.get_bind()
    packed_table = plain("job_verdicts", ("job_id", *PACKED))
    old = plain("job_verdict", ROW)
    for jobs, summaries in jobs_kept():
        query = sa.select(packed_table).where(packed_table.c.job_id.in_(jobs))
        by_job = {row[0]: [bytes(part) for part in row[1:]] for row in connection.execute(query)}
        unpacked = {job_id: unpack(packed) for job_id, packed in by_job.items()}
        keys = keys_of({row[0] for rows in unpacked.values() for row in rows})
        numbers = numbers_of(jobs)
        rows_out = []
        for job_id in jobs:
            rows = unpacked.get(job_id, [])
            rows_out += [
                {
                    "job_id": job_id,
                    "position": position,
                    "key_id": key_id,
                    "measured": stored_float(measured),
                    "tolerance": stored_float(tolerance),
                    "figures": figures,
                }
                for position, (key_id, measured, tolerance, figures) in enumerate(rows)
            ]
            digest, kept = summaries[job_id]
            own = numbers.get((job_id, digest), {})
            verdicts = old_rows(rows, keys)
            packed = by_job.get(job_id, [b""] * len(PACKED))
            key_digests = b"".join(keys[row[0]][0] for row in rows) if verdicts is not None else b""
            intact = (
                verdicts is not None
                and kept is not None
                and new_checksum(job_id, digest, key_digests, packed, own) == kept
            )
            set_checksum(job_id, old_checksum(job_id, digest, verdicts, own) if intact else None)
        if rows_out:
            connection.execute(sa.insert(old), rows_out)
    op.drop_table("job_verdicts")
