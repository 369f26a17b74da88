"""job_summary as compressed bytes, a short job's drawn lines left out; job_verdict keyed
by job and position, without a rowid on SQLite

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

The upgrade replaces each summary's JSON text (``document``) by ``data``: one format byte,
then the zstandard frame of the same JSON, its trajectories (the figure's downsampled lines)
set to null for a job of at most ``DRAWN_KEPT_ABOVE`` loss values, whose pages draw them from
its points. The downgrade writes the JSON text back; a summary whose lines were left out
cannot be made without the analysis, so its row is deleted: the tracker of 0007 summarises
such a job from its points when shown, and ``tracker db rederive`` refills the row.

``job_verdict`` loses its ``expectations`` column (64 characters on each of a job's ~100
rows): a job's verdicts are those of the digest of its ``job_number`` rows, written with
them. Verdict rows of any other digest, which no tracker reads, are dropped; the downgrade
gives each row its job's digest back.

An old revision never runs today's code: the format (``tracker.summary.model``, format 1) is
copied here, and a test checks that both write the same bytes.
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
import zstandard
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STORED_FORMAT = 1
DRAWN_KEPT_ABOVE = 100_000
LEVEL = 9

summary = sa.table(
    "job_summary",
    sa.column("job_id", sa.Integer()),
    sa.column("expectations", sa.String(64)),
    sa.column("document", sa.Text()),
    sa.column("data", sa.LargeBinary()),
)
KEY = (summary.c.job_id == sa.bindparam("key_job")) & (
    summary.c.expectations == sa.bindparam("key_expectations")
)


def compact(document: str) -> bytes:
    """A summary's JSON text (NaN and +-inf as bare tokens) in format 1."""
    doc = json.loads(document)
    if doc["steps"] <= DRAWN_KEPT_ABOVE:
        doc["trajectories"] = None
    text = json.dumps(doc).encode("utf-8")
    return bytes([STORED_FORMAT]) + zstandard.ZstdCompressor(level=LEVEL).compress(text)


def document_of(data: bytes) -> str | None:
    """The JSON text of a summary in format 1; None when its lines were left out."""
    assert data[0] == STORED_FORMAT, data[:1]
    text = zstandard.ZstdDecompressor().decompress(data[1:]).decode("utf-8")
    return None if json.loads(text)["trajectories"] is None else text


def _keys() -> list[tuple[int, str]]:
    query = sa.select(summary.c.job_id, summary.c.expectations).order_by(summary.c.job_id)
    return [(job_id, digest) for job_id, digest in op.get_bind().execute(query)]


def _one(column: sa.ColumnClause[object], job_id: int, digest: str) -> object:
    query = sa.select(column).where(summary.c.job_id == job_id, summary.c.expectations == digest)
    return op.get_bind().execute(query).scalar_one()


def upgrade() -> None:
    _compact_summaries()
    connection = op.get_bind()
    connection.execute(
        sa.text(
            "DELETE FROM job_verdict WHERE NOT EXISTS (SELECT 1 FROM job_number n "
            "WHERE n.job_id = job_verdict.job_id AND n.expectations = job_verdict.expectations)"
        )
    )
    if connection.dialect.name == "sqlite":
        with op.batch_alter_table(
            "job_verdict", recreate="always", table_kwargs={"sqlite_with_rowid": False}
        ) as batch:
            batch.drop_column("expectations")
    else:
        op.drop_constraint("job_verdict_pkey", "job_verdict", type_="primary")
        op.drop_column("job_verdict", "expectations")
        op.create_primary_key("job_verdict_pkey", "job_verdict", ["job_id", "position"])


def downgrade() -> None:
    connection = op.get_bind()
    op.add_column("job_verdict", sa.Column("expectations", sa.String(64), nullable=True))
    connection.execute(
        sa.text(
            "UPDATE job_verdict SET expectations = (SELECT min(n.expectations) FROM job_number n "
            "WHERE n.job_id = job_verdict.job_id)"
        )
    )
    connection.execute(sa.text("DELETE FROM job_verdict WHERE expectations IS NULL"))
    if connection.dialect.name == "sqlite":  # as 0003 made it, with a rowid
        with op.batch_alter_table("job_verdict", recreate="always", copy_from=_verdicts_0003()):
            pass
    else:
        op.drop_constraint("job_verdict_pkey", "job_verdict", type_="primary")
        op.alter_column("job_verdict", "expectations", nullable=False)
        op.create_primary_key(
            "job_verdict_pkey", "job_verdict", ["job_id", "expectations", "position"]
        )
    _restore_summaries()


def _verdicts_0003() -> sa.Table:
    return sa.Table(
        "job_verdict",
        sa.MetaData(),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("expectations", sa.String(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("check", sa.String(length=100), nullable=False),
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("measured", sa.Float(), nullable=True),
        sa.Column("expected", sa.Float(), nullable=True),
        sa.Column("tolerance", sa.Float(), nullable=True),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["job.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "expectations", "position"),
    )


def _compact_summaries() -> None:
    with op.batch_alter_table("job_summary") as batch:
        batch.add_column(sa.Column("data", sa.LargeBinary(), nullable=True))
    connection = op.get_bind()
    for job_id, digest in _keys():  # one row at a time: a document may be large
        document = _one(summary.c.document, job_id, digest)
        assert isinstance(document, str)
        connection.execute(
            summary.update().where(KEY).values(data=compact(document)),
            {"key_job": job_id, "key_expectations": digest},
        )
    with op.batch_alter_table("job_summary") as batch:
        batch.drop_column("document")
        batch.alter_column("data", existing_type=sa.LargeBinary(), nullable=False)


def _restore_summaries() -> None:
    with op.batch_alter_table("job_summary") as batch:
        batch.add_column(sa.Column("document", sa.Text(), nullable=True))
    connection = op.get_bind()
    for job_id, digest in _keys():
        document = document_of(bytes(_one(summary.c.data, job_id, digest)))  # type: ignore[arg-type]
        params = {"key_job": job_id, "key_expectations": digest}
        if document is None:
            connection.execute(summary.delete().where(KEY), params)
        else:
            connection.execute(summary.update().where(KEY).values(document=document), params)
    with op.batch_alter_table("job_summary") as batch:
        batch.drop_column("data")
        batch.alter_column("document", existing_type=sa.Text(), nullable=False)
