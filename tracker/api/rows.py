"""The light part of ``tracker.api``: opening a tracker database, the catalog's reads and
edits (rows and dicts, no polars), raw read-only SQL and the schema revision, and the
parsing of ``--where`` and ``--since`` by the catalog's own rules.

The command line's light commands (``jobs``, ``show``, ``meta``, ``delete``, ``sql``,
``db current``) call only these, so that they start without polars; import them from
``tracker.api``, which loads this module alone for them. Every command runs inside
``keeping_lost_interrupts`` (a Ctrl-C Python swallowed is raised at the command's next step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from functools import lru_cache, partial
from pathlib import Path
from typing import TypeVar

from sqlalchemy import Engine, func, make_url, select
from sqlalchemy.orm import Session

from tracker.conditions import Condition
from tracker.config import database_url
from tracker.domain import JOB_SORT_KEYS
from tracker.models import Job
from tracker.services.interrupts import keeping_lost_interrupts, raise_lost_interrupt
from tracker.store import catalog
from tracker.store.catalog import meta_text, parse_time, parse_where
from tracker.store.engine import ON_LOCK_WAIT, create_tracker_engine, first_line
from tracker.store.readonly import DEFAULT_LIMITS, SqlLimits, SqlResult, run_readonly_sql
from tracker.store.schema import HEAD, check_schema, open_database
from tracker.store.sqlite_files import (
    read_only_url,
    reads_only_as_immutable,
    refuse_missing_file,
    sqlite_file,
)
from tracker.store.transactions import in_write_transaction
from tracker.store.verdict_keys import sweep_keys

Database = str | Engine | None
Row = catalog.Row
T = TypeVar("T")

__all__ = [
    "HEAD",
    "Database",
    "Row",
    "SqlLimits",
    "SqlResult",
    "check_study",
    "connect",
    "delete",
    "edit_meta",
    "first_line",
    "in_write",
    "job_meta",
    "job_rows",
    "keeping_lost_interrupts",
    "meta_text",
    "open_engine",
    "parse_time",
    "parse_where",
    "raise_lost_interrupt",
    "schema_revision",
    "show",
    "sql_result",
    "storing_engine",
    "studies",
    "using_engine",
    "with_session",
]


def check_study(name: str) -> str:
    """``name`` if a study of that name is packaged; else ``UnknownStudy`` naming them."""
    from tracker.analysis import expectations  # pydantic: only for the commands that need it

    return expectations.check_study(name)


def use_study_dirs(dirs: list[Path]) -> None:
    """Study files in these directories too (``--studies``), for this process."""
    from tracker.analysis.study_files import use_study_dirs as use

    use(dirs)


def studies(db: Database = None, *, missing_ok: bool = False) -> list[Row]:
    """The known studies (``tracker studies``): ``name``, ``title``, ``paper`` and how many
    ``claims`` each judges (its ``[[claims]]``); the study files' (the default study first),
    then, with ``db`` (a URL or an engine; None: none), those only the database defines,
    every row then saying its ``source``. ``missing_ok``: a SQLite file that is not there is
    no database (only the files listed) instead of ``NoSuchDatabase``."""
    from tracker.queries.studies import study_rows  # pydantic: only for the commands that need it

    if db is None:
        return study_rows()
    path = None if isinstance(db, Engine) else sqlite_file(database_url(db))
    if missing_ok and path is not None and not Path(path).exists():
        return study_rows()
    return with_session(db, study_rows)


def connect(url: str | None = None) -> Engine:
    """An engine on a ready tracker database (migrated if empty); a missing SQLite file is
    refused, the API only reads."""
    return open_database(database_url(url), may_create_file=False)


# The engine of a URL the library's calls open themselves, kept for the process: its compiled
# statements and its dialect's first-connect look-ups serve every later call on the URL (a
# script's loop of reads), as a server's one engine does. Each call still checks the database
# (the file there, its schema) and closes the engine's connections when done, so no file is
# held open between calls. ``connect`` gives an engine of the caller's own, never this one.
_kept_engine = lru_cache(maxsize=16)(create_tracker_engine)


def _connected(url: str | None) -> Engine:
    return open_database(database_url(url), may_create_file=False, engine_of=_kept_engine)


def open_engine(
    url: str,
    *,
    may_create_file: bool = False,
    on_lock_wait: Callable[[Engine], None] | None = None,
) -> Engine:
    """An engine on a ready tracker database for a command: only commands that store data
    (ingest, sync, demo) may create a SQLite file; ``on_lock_wait`` is told, with the engine,
    when a write has to queue behind another writer."""
    engine = open_database(url, may_create_file=may_create_file)
    if on_lock_wait is None:
        return engine
    return engine.execution_options(**{ON_LOCK_WAIT: partial(on_lock_wait, engine)})


@contextmanager
def using_engine(db: Database, *, may_create_file: bool = False) -> Iterator[Engine]:
    """``db`` as an engine: an engine given is used as it is, one made here is disposed of
    after."""
    if isinstance(db, Engine):
        yield db
        return
    engine = open_engine(database_url(db), may_create_file=may_create_file)
    try:
        yield engine
    finally:
        engine.dispose()


@contextmanager
def storing_engine(
    db: Database, on_lock_wait: Callable[[Engine], None] | None = None
) -> Iterator[Engine]:
    """The engine of a command that stores jobs (ingest): it may create the SQLite file,
    and removes a file it created again if no job was stored in it, so that a failed
    command with a mistyped ``--db`` leaves no empty database behind."""
    if isinstance(db, Engine):
        yield db
        return
    url = database_url(db)
    parsed = make_url(url)
    created = None
    if parsed.get_backend_name() == "sqlite" and not parsed.query.get("uri"):
        path = Path(parsed.database or "")
        created = None if parsed.database in (None, "", ":memory:") or path.exists() else path
    engine = open_engine(url, may_create_file=True, on_lock_wait=on_lock_wait)
    try:
        yield engine
    finally:
        if created is not None:
            with engine.connect() as connection:
                stored = connection.scalar(select(func.count()).select_from(Job))
        engine.dispose()
        if created is not None and not stored:
            for suffix in ("", "-wal", "-shm"):
                created.with_name(created.name + suffix).unlink(missing_ok=True)


def with_session(db: Database, work: Callable[[Session], T]) -> T:
    """Run ``work`` in a read session on ``db`` (an engine opened here has its connections
    closed after)."""
    engine = db if isinstance(db, Engine) else _connected(db)
    try:
        with Session(engine) as session:
            return work(session)
    finally:
        if engine is not db:
            engine.dispose()


def in_write(db: Database, work: Callable[[Session], T]) -> T:
    """Run ``work`` in one write transaction on ``db`` (``in_write_transaction``)."""
    engine = db if isinstance(db, Engine) else _connected(db)
    try:
        return in_write_transaction(engine, work)
    finally:
        if engine is not db:
            engine.dispose()


def job_rows(
    db: Database = None,
    *,
    where: Iterable[Condition | tuple[str, str]] = (),
    since: datetime | None = None,
    sort: str | None = None,
    limit: int | None = None,
) -> list[Row]:
    """Every job with its counts and metadata, in job order, as rows (``jobs`` as a frame):
    only those satisfying the ``where`` conditions (on metadata, or on a run's numbers), at or
    after ``since``; sorted by ``sort`` (one of ``JOB_SORT_KEYS``, ``-KEY`` descending), the
    first ``limit`` of them."""
    rows = with_session(db, partial(catalog.select_jobs, where=tuple(where), since=since))
    if sort is not None:
        key = sort.removeprefix("-")
        if key not in JOB_SORT_KEYS:
            raise ValueError(f"cannot sort jobs by {key!r}; one of: {', '.join(JOB_SORT_KEYS)}")
        rows.sort(key=lambda row: row[key], reverse=sort.startswith("-"))
    return rows if limit is None else rows[:limit]


SHOW_PARTS = {"probes": catalog.job_probes, "arms": catalog.job_arms}


def show(db: Database, job: str, parts: Iterable[str] = tuple(SHOW_PARTS)) -> dict[str, list[Row]]:
    """One job's tables by name, of ``probes`` (its memory probes) and ``arms`` (its
    training runs)."""
    names = list(parts)
    return with_session(db, lambda s: {name: SHOW_PARTS[name](s, job) for name in names})


def job_meta(db: Database, job: str) -> dict[str, str]:
    """A job's metadata, by key."""
    return with_session(db, lambda s: catalog.job_meta(s, job))


def edit_meta(
    db: Database, job: str, meta: Mapping[str, str], unset: Iterable[str] = ()
) -> dict[str, str]:
    """Set and remove a job's metadata keys (``time`` is checked), in one write transaction;
    returns its metadata afterwards."""
    edit = partial(catalog.edit_job_meta, name=job, meta=meta, unset=unset)
    return in_write(db, edit)


def delete(db: Database, jobs: Iterable[str] | str) -> None:
    """Delete jobs and everything ingested with them, in one write transaction."""
    names = [jobs] if isinstance(jobs, str) else list(jobs)

    def delete_all(session: Session) -> None:
        for name in names:
            catalog.delete_job(session, name)
        sweep_keys(session)

    in_write(db, delete_all)


def sql_result(db: Database, statement: str, limits: SqlLimits = DEFAULT_LIMITS) -> SqlResult:
    """One read-only SQL statement's columns and rows, as the database gave them; one past
    ``limits`` (running time, rows, bytes) is stopped (``SqlRefused``)."""
    if isinstance(db, Engine):
        url = db.url.render_as_string(hide_password=False)
    else:
        url = database_url(db)
        connect(url).dispose()  # checks and, if empty, migrates the database first
    return run_readonly_sql(url, statement, limits)


def schema_revision(url: str | None = None) -> str | None:
    """The database's schema revision (None: an empty database), read without migrating;
    this tracker's newest is ``HEAD``."""
    url = database_url(url)
    immutable = reads_only_as_immutable(url)  # on read-only media
    engine = create_tracker_engine(read_only_url(url, immutable=True) if immutable else url)
    try:
        refuse_missing_file(engine)
        return check_schema(engine, create=False)
    finally:
        engine.dispose()
