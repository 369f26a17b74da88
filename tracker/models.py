"""The schema, as typed SQLAlchemy models. Alembic migrations are the only way it is created.

Non-finite floats: PostgreSQL stores NaN and +-inf natively; SQLite stores +-inf but turns a
bound NaN into NULL. Scalar columns that may legitimately be NULL (a summary's ``val_loss``)
use ``ExactFloat``, which stores NaN as the text 'NaN' on SQLite so that NULL and NaN stay
distinct. Curve points are not rows: they are stored as compressed chunks (``CurveChunk``),
which keep every value's bits.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from tracker.jsonio import from_stored_json, to_stored_json


class _UnprocessedFloat(Float[float]):
    """Float DDL, but values pass to and from the driver as they are (text 'NaN' included)."""

    def bind_processor(self, dialect: Dialect) -> None:
        return None

    def result_processor(self, dialect: Dialect, coltype: object) -> None:
        return None


class ExactFloat(TypeDecorator[float]):
    """A nullable float column that keeps NaN distinct from NULL on SQLite too."""

    impl = Float
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        return _UnprocessedFloat() if dialect.name == "sqlite" else Float()

    def process_bind_param(self, value: float | None, dialect: Dialect) -> Any:
        if value is not None and dialect.name == "sqlite" and math.isnan(value):
            return "NaN"  # a REAL-affinity column keeps non-numeric text as it is
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> float | None:
        return None if value is None else float(value)


class JSONDocument(TypeDecorator[dict[str, Any]]):
    """A JSON object stored as text, so NaN and +-inf inside it survive on every backend."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: dict[str, Any] | None, dialect: Dialect) -> str | None:
        return None if value is None else to_stored_json(value, sort_keys=True)

    def process_result_value(self, value: str | None, dialect: Dialect) -> dict[str, Any] | None:
        return stored_document(value)


def stored_document(text: str | None) -> dict[str, Any] | None:
    """A ``JSONDocument`` column's text as SQLAlchemy reads it (for the driver's own rows)."""
    return None if text is None else from_stored_json(text)


class Base(DeclarativeBase):
    pass


class Job(Base):
    """One downloaded cloud job directory."""

    __tablename__ = "job"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    source_path: Mapped[str] = mapped_column(Text)
    ingested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    content_digest: Mapped[str] = mapped_column(String(64))
    # the study whose expectations judge it (tracker/studies/NAME.toml)
    study: Mapped[str] = mapped_column(
        String(100), default="flashoptim", server_default="flashoptim"
    )
    # the digest of the study file's text it was ingested with (StudyDefinition); None
    # for jobs stored before databases kept them
    study_digest: Mapped[str | None] = mapped_column(String(64))

    meta: Mapped[list[JobMeta]] = relationship(
        back_populates="job", cascade="all, delete-orphan", passive_deletes=True
    )
    files: Mapped[list[SourceFile]] = relationship(
        back_populates="job", cascade="all, delete-orphan", passive_deletes=True
    )
    probes: Mapped[list[Probe]] = relationship(
        back_populates="job", cascade="all, delete-orphan", passive_deletes=True
    )
    runs: Mapped[list[Run]] = relationship(
        back_populates="job", cascade="all, delete-orphan", passive_deletes=True
    )


class StudyDefinition(Base):
    """A study file's exact text, once per digest (its sha256), as jobs were ingested with
    it: what judges them where no file of that study is."""

    __tablename__ = "study_definition"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    text: Mapped[str] = mapped_column(Text)


class JobMeta(Base):
    """``--meta KEY=VALUE`` given at ingest; a table of its own so queries can filter on it."""

    __tablename__ = "job_meta"

    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)

    job: Mapped[Job] = relationship(back_populates="meta")


class SourceFile(Base):
    """Provenance: every file read for a job, relative to the job directory."""

    __tablename__ = "source_file"

    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), primary_key=True)
    path: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger)
    # the file's version as its storage listed it at ingest (ETag, generation, mtime): a
    # sync whose listing shows the same names, sizes and versions downloads nothing
    version: Mapped[str | None] = mapped_column(Text)

    job: Mapped[Job] = relationship(back_populates="files")


class Probe(Base):
    """One memory-probe record; a failed probe has no measurements and an ``error``."""

    __tablename__ = "probe"
    __table_args__ = (UniqueConstraint("job_id", "model", "variant"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), index=True)
    model: Mapped[str] = mapped_column(String(200))
    variant: Mapped[str] = mapped_column(String(200))
    n_params: Mapped[int | None] = mapped_column(BigInteger)
    bpp_params: Mapped[float | None] = mapped_column(ExactFloat)
    bpp_state: Mapped[float | None] = mapped_column(ExactFloat)
    bpp_grads: Mapped[float | None] = mapped_column(ExactFloat)
    bpp_params_state_grads: Mapped[float | None] = mapped_column(ExactFloat)
    peak_steady: Mapped[int | None] = mapped_column(BigInteger)
    error: Mapped[str | None] = mapped_column(Text)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONDocument)

    job: Mapped[Job] = relationship(back_populates="probes")


class Run(Base):
    """One training arm, ``<variant>_s<seed>``, with its summary JSON."""

    __tablename__ = "run"
    __table_args__ = (UniqueConstraint("job_id", "arm"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), index=True)
    arm: Mapped[str] = mapped_column(String(200))
    model: Mapped[str] = mapped_column(String(200))
    variant: Mapped[str] = mapped_column(String(200))
    seed: Mapped[int] = mapped_column(Integer)
    val_loss: Mapped[float | None] = mapped_column(ExactFloat)
    final_loss: Mapped[float | None] = mapped_column(ExactFloat)
    diverged: Mapped[bool | None] = mapped_column(Boolean)
    extra: Mapped[dict[str, Any]] = mapped_column(JSONDocument)
    # the xxh3-64 of the run's columns, notes and curve rows, seeded by its job
    # (tracker.store.run_rows: checked on every read of them); NULL reads as damaged
    checksum: Mapped[int | None] = mapped_column(BigInteger)

    job: Mapped[Job] = relationship(back_populates="runs")
    curves: Mapped[list[Curve]] = relationship(
        back_populates="run", cascade="all, delete-orphan", passive_deletes=True
    )
    notes: Mapped[list[RunNoteRow]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="RunNoteRow.position"
    )


class RunNoteRow(Base):
    """One note on a run: what ingest settled or found in its files (``tracker.notes``)."""

    __tablename__ = "run_note"

    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(40))
    text: Mapped[str] = mapped_column(Text)
    first_step: Mapped[int | None] = mapped_column(BigInteger)
    last_step: Mapped[int | None] = mapped_column(BigInteger)
    count: Mapped[int | None] = mapped_column(BigInteger)


class Curve(Base):
    """One metric of one run, with a summary so listings never scan its points."""

    __tablename__ = "curve"
    __table_args__ = (UniqueConstraint("run_id", "metric"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    metric: Mapped[str] = mapped_column(String(200))
    n_points: Mapped[int] = mapped_column(Integer)
    first_step: Mapped[int | None] = mapped_column(BigInteger)
    last_step: Mapped[int | None] = mapped_column(BigInteger)
    first_value: Mapped[float | None] = mapped_column(ExactFloat)
    last_value: Mapped[float | None] = mapped_column(ExactFloat)
    min_value: Mapped[float | None] = mapped_column(ExactFloat)  # over finite values
    max_value: Mapped[float | None] = mapped_column(ExactFloat)  # over finite values
    n_nonfinite: Mapped[int] = mapped_column(Integer)  # points that are NaN, +inf or -inf

    run: Mapped[Run] = relationship(back_populates="curves")


class CurveChunk(Base):
    """Up to ``tracker.store.points.CHUNK_POINTS`` consecutive points of a curve, compressed
    (``tracker.store.codec``): a range read fetches only the chunks whose steps it needs,
    found through the key (``curve_id``, ``first_step``). ``min_value``/``max_value`` are over
    the chunk's finite values (NULL when it has none); ``checksum`` is the codec's of ``data``
    (checked on every read)."""

    __tablename__ = "curve_chunk"

    curve_id: Mapped[int] = mapped_column(
        ForeignKey("curve.id", ondelete="CASCADE"), primary_key=True
    )
    first_step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    last_step: Mapped[int] = mapped_column(BigInteger)
    n_points: Mapped[int] = mapped_column(Integer)
    min_value: Mapped[float | None] = mapped_column(Float)
    max_value: Mapped[float | None] = mapped_column(Float)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    checksum: Mapped[int] = mapped_column(BigInteger)


class VerdictKey(Base):
    """What a verdict shares with the same verdict of other jobs, stored once: its check,
    subject, expected value, status, known reason and detail with its decimal numbers taken
    out (``tracker.store.verdict_keys``). ``digest`` (of all of them) makes a key unique: a
    B-tree entry on PostgreSQL is limited to about 2.7 KB, and a detail is not."""

    __tablename__ = "verdict_key"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[bytes] = mapped_column(LargeBinary(16), unique=True)
    check: Mapped[str] = mapped_column(String(100))
    subject: Mapped[str] = mapped_column(String(300))
    expected: Mapped[float | None] = mapped_column(ExactFloat)
    status: Mapped[str] = mapped_column(String(8))
    known: Mapped[str | None] = mapped_column(Text)  # a KNOWN verdict's reason
    detail_template: Mapped[str] = mapped_column(Text)


class JobVerdicts(Base):
    """A job's verdicts as its analysis found them, kept so cross-job claims and gates never
    re-read points. They were judged against the expectations of the job's ``JobNumber``
    rows (a job's derived rows are written together, for one digest: tracker.store.kept_rows);
    other expectations are analysed afresh and not stored. One row a job, its verdicts as
    columns in position order, packed little-endian (``tracker.store.packed_verdicts``): what
    a verdict shares with the same verdict of other jobs is its key's (``keys``: int32 ids),
    its own are its measured value and tolerance (float64 each, NaN where ``absent`` says it
    has none), and the decimal numbers of its detail (``figures``, each verdict's ending at
    its int32 ``figure_ends``: ``verdict_keys``). Read for 10,000 jobs, that is 10,000 rows,
    not a million. No foreign key to the keys: a missing key fails the job's checksum like
    any damage."""

    __tablename__ = "job_verdicts"

    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    keys: Mapped[bytes] = mapped_column(LargeBinary)
    measured: Mapped[bytes] = mapped_column(LargeBinary)
    tolerance: Mapped[bytes] = mapped_column(LargeBinary)
    absent: Mapped[bytes] = mapped_column(LargeBinary)  # a byte a verdict: ABSENT_* bits
    figure_ends: Mapped[bytes] = mapped_column(LargeBinary)
    figures: Mapped[bytes] = mapped_column(LargeBinary)


class RunIndex(Base):
    """A job's runs as the runs table, the seeds table and the claims read them
    (``tracker.summary.run_index``: a dozen numbers a run, packed in ``runs``), made from its
    rows when its other derived rows are, so that a read across jobs reads one row a job and
    not every run's rows. ``code``: the digest of the code that made it
    (``tracker.summary.version.CODE_DIGEST``); ``checksum``: the xxh3-64 of it and ``runs``,
    seeded with the job's id, checked on every read (``tracker.store.run_index``)."""

    __tablename__ = "run_index"

    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), primary_key=True)
    code: Mapped[str] = mapped_column(String(64))
    checksum: Mapped[int] = mapped_column(BigInteger)
    runs: Mapped[bytes] = mapped_column(LargeBinary)


class JobNumber(Base):
    """Per-job numbers that need every point (EMA deltas, the step an arm diverged at)."""

    __tablename__ = "job_number"

    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), primary_key=True)
    expectations: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[float | None] = mapped_column(ExactFloat)


class JobSummary(Base):
    """What a job's pages show that takes every point to make (its analysis, the drawn
    trajectories of a long job, the smoothed curves on a grid), as compressed bytes
    (``tracker.summary.model``), kept so that reports and the server never re-read a long
    job's points. ``expectations``: the digest of what it was judged against."""

    __tablename__ = "job_summary"

    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), primary_key=True)
    expectations: Mapped[str] = mapped_column(String(64), primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    # the xxh3-64 of the job's verdict and number rows written with it (checked on every read
    # of them: tracker.store.kept_rows); NULL: written before it was kept, read as not kept
    rows_checksum: Mapped[int | None] = mapped_column(BigInteger)


class JobIndex(Base):
    """What the index and the runs table show of a job that its kept rows give: its verdicts'
    count of each status and its smoothed curves on a grid (``Summary.curves_to_stored``),
    written with them (tracker.store.kept_rows), so that listing many jobs reads neither their
    verdicts nor their summaries. ``checksum``: the xxh3-64 of the counts (the curves check
    themselves), checked on every read."""

    __tablename__ = "job_index"

    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), primary_key=True)
    expectations: Mapped[str] = mapped_column(String(64), primary_key=True)
    passed: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    known: Mapped[int] = mapped_column(Integer)
    not_applicable: Mapped[int] = mapped_column(Integer)
    checksum: Mapped[int] = mapped_column(BigInteger)
    grid_curves: Mapped[bytes] = mapped_column(LargeBinary)  # last: read only when asked for
