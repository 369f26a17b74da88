"""Kept verdicts keyed: what a verdict shares with other jobs' in ``verdict_key``, once

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04

A job's hundred verdicts took about 21 KB, mostly texts every job repeats. ``verdict_key``
keeps a verdict's check, subject, expected value, status, known reason and detail with its
decimal numbers taken out; ``job_verdict`` keeps the position, the key, the measured value,
the tolerance and those numbers (packed two characters a byte). The upgrade converts every
row, the downgrade rebuilds the rows as they were; both byte for byte (the detail's
numbers are kept as written), so each job's rows checksum still holds. No analysis runs;
the functions below are this revision's own copies.
"""

import hashlib
import json
import re
from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PLACEHOLDER = "\x1f"
NUMBER = re.compile(r"(?<![\w.])[0-9]+\.[0-9]+(?!\w|\.[0-9])")  # ASCII: \d matches any digit
ALPHABET = "0123456789. "
PAD = 15
JOBS_A_STEP = 200  # jobs converted a statement: bounded memory on a large database

OLD = ("check", "subject", "measured", "expected", "tolerance", "status", "detail", "known")
KEY = ("check", "subject", "expected", "status", "known", "detail_template")


def split_detail(detail: str) -> tuple[str, bytes | None]:
    if PLACEHOLDER in detail:
        return detail, None
    numbers = NUMBER.findall(detail)
    if not numbers:
        return detail, None
    codes = [ALPHABET.index(c) for c in " ".join(numbers)]
    codes += [PAD] * (len(codes) % 2)
    packed = bytes(high << 4 | low for high, low in zip(codes[::2], codes[1::2], strict=True))
    return NUMBER.sub(PLACEHOLDER, detail), packed


def joined_detail(template: str, figures: bytes | None) -> str:
    if figures is None:
        return template
    codes = [code for byte in figures for code in (byte >> 4, byte & 15) if code != PAD]
    numbers = "".join(ALPHABET[code] for code in codes).split(" ")
    parts = template.split(PLACEHOLDER)
    return "".join(part + number for part, number in zip(parts, numbers, strict=False)) + parts[-1]


def key_digest(key: tuple[object, ...]) -> bytes:
    check, subject, expected, status, known, template = key
    exact = None if expected is None else repr(float(expected))  # type: ignore[arg-type]
    document = [check, subject, exact, status, known, template]
    text = json.dumps(document)  # as tracker.jsonio.to_stored_json writes it
    return hashlib.sha256(text.encode("utf-8")).digest()[:16]


def create_verdicts(*columns: sa.Column[object]) -> None:
    """``job_verdict`` with these columns after its key, without a rowid on SQLite."""
    op.create_table(
        "job_verdict",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        *columns,
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "position"),
        sqlite_with_rowid=False,
    )


# untyped columns: values (SQLite's text 'NaN' among them) go across as the driver gives them
def plain(name: str, columns: Sequence[str]) -> sa.TableClause:
    return sa.table(name, *(sa.column(c) for c in columns))


def set_aside() -> None:
    """``job_verdict`` renamed ``job_verdict_old``, its primary key's index too (PostgreSQL
    names indexes per schema), so the new table can take the names."""
    op.rename_table("job_verdict", "job_verdict_old")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER INDEX job_verdict_pkey RENAME TO job_verdict_old_pkey")


def job_batches(table: str) -> Iterator[list[int]]:
    connection = op.get_bind()
    query = sa.text(f"SELECT DISTINCT job_id FROM {table}")
    jobs = sorted(row[0] for row in connection.execute(query))
    for start in range(0, len(jobs), JOBS_A_STEP):
        yield jobs[start : start + JOBS_A_STEP]


def upgrade() -> None:
    op.create_table(
        "verdict_key",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.LargeBinary(length=16), nullable=False),
        sa.Column("check", sa.String(length=100), nullable=False),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("expected", sa.Float(), nullable=True),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("known", sa.Text(), nullable=True),
        sa.Column("detail_template", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("digest"),
    )
    set_aside()
    connection = op.get_bind()
    create_verdicts(
        sa.Column("key_id", sa.Integer(), nullable=False),
        sa.Column("measured", sa.Float(), nullable=True),
        sa.Column("tolerance", sa.Float(), nullable=True),
        sa.Column("figures", sa.LargeBinary(), nullable=True),
    )
    old = plain("job_verdict_old", ("job_id", "position", *OLD))
    keys = plain("verdict_key", ("id", "digest", *KEY))
    new = plain("job_verdict", ("job_id", "position", "key_id", "measured", "tolerance", "figures"))
    ids: dict[bytes, int] = {}
    for jobs in job_batches("job_verdict_old"):
        query = sa.select(old).where(old.c.job_id.in_(jobs)).order_by("job_id", "position")
        new_keys, rows = [], []
        for row in connection.execute(query):
            old_row = row._mapping
            template, figures = split_detail(old_row["detail"])
            expected = old_row["expected"]  # a float, or SQLite's text 'NaN'
            exact = None if expected is None else float(expected)
            key = (old_row["check"], old_row["subject"], exact, old_row["status"])
            key += (old_row["known"], template)
            digest = key_digest(key)
            if digest not in ids:
                ids[digest] = len(ids) + 1
                values = dict(zip(KEY, key, strict=True)) | {"expected": expected}  # as stored
                new_keys.append({"id": ids[digest], "digest": digest, **values})
            rows.append(
                {column: old_row[column] for column in ("job_id", "position", "measured")}
                | {"key_id": ids[digest], "tolerance": old_row["tolerance"], "figures": figures}
            )
        if new_keys:
            connection.execute(sa.insert(keys), new_keys)
        if rows:
            connection.execute(sa.insert(new), rows)
    if connection.dialect.name == "postgresql" and ids:  # the next key's id follows these
        op.execute("SELECT setval('verdict_key_id_seq', (SELECT max(id) FROM verdict_key))")
    op.drop_table("job_verdict_old")


def downgrade() -> None:
    set_aside()
    connection = op.get_bind()
    create_verdicts(
        sa.Column("check", sa.String(length=100), nullable=False),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("measured", sa.Float(), nullable=True),
        sa.Column("expected", sa.Float(), nullable=True),
        sa.Column("tolerance", sa.Float(), nullable=True),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("known", sa.Text(), nullable=True),
    )
    kept = plain(
        "job_verdict_old", ("job_id", "position", "key_id", "measured", "tolerance", "figures")
    )
    keys = plain("verdict_key", ("id", *KEY))
    new = plain("job_verdict", ("job_id", "position", *OLD))
    for jobs in job_batches("job_verdict_old"):
        query = (
            sa.select(kept.c.job_id, kept.c.position, keys.c.check, keys.c.subject, kept.c.measured)
            .add_columns(keys.c.expected, kept.c.tolerance, keys.c.status, keys.c.detail_template)
            .add_columns(kept.c.figures, keys.c.known)
            .join(keys, keys.c.id == kept.c.key_id)
            .where(kept.c.job_id.in_(jobs))
            .order_by(kept.c.job_id, kept.c.position)
        )
        rows = [
            dict(
                zip(
                    ("job_id", "position", *OLD),
                    (
                        *row[:8],
                        joined_detail(template, None if figures is None else bytes(figures)),
                        known,
                    ),
                    strict=True,
                )
            )
            for *row, template, figures, known in connection.execute(query)
        ]
        if rows:
            connection.execute(sa.insert(new), rows)
    op.drop_table("job_verdict_old")
    op.drop_table("verdict_key")
