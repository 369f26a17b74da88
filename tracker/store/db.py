"""Engines and the schema's lifecycle: connect, check the Alembic revision, upgrade.

SQLite databases run in WAL mode, with a busy timeout, so that several processes can ingest
into one file; write transactions start with ``BEGIN IMMEDIATE`` so that a writer waits for
the lock up front instead of failing half-way with "database is locked".
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    IntegrityError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.orm import Session

from tracker.config import normalize_url
from tracker.errors import (
    DatabaseBusy,
    DatabaseFailed,
    DatabaseUnavailable,
    NoSuchDatabase,
    NotATrackerDatabase,
    OutdatedSchema,
    UnknownRevision,
    UpgradeFailed,
)

if TYPE_CHECKING:
    from alembic.config import Config

# The migrations this code knows, oldest first (a test checks them against migrations/).
# Knowing them here spares every command the import of Alembic, which only migrations need.
REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007")
HEAD = REVISIONS[-1]
SQLITE_BUSY_TIMEOUT_MS = 60_000
WRITE_PATIENCE_S = 900.0
SCHEMA_LOCK_ID = 0x7472_6163  # "trac": the advisory lock serialising schema changes
WRITE = {"tracker_write": True}
# Execution option: a callable run when a SQLite write has to queue behind another writer.
ON_LOCK_WAIT = "tracker_on_lock_wait"
T = TypeVar("T")


def _migrations_dir() -> Path:
    # A wheel carries the scripts inside the package; a source checkout has them at the top.
    package = Path(__file__).resolve().parent.parent
    inside = package / "migrations"
    return inside if inside.is_dir() else package.parent / "migrations"


def alembic_config() -> Config:
    from alembic.config import Config  # lazy on purpose: ~0.3 s, and only migrations need it

    config = Config()
    config.set_main_option("script_location", str(_migrations_dir()))
    return config


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(connection: Connection) -> None:
        options = connection.get_execution_options()
        if not options.get("tracker_write", False):
            connection.exec_driver_sql("BEGIN")
            return
        on_wait = options.get(ON_LOCK_WAIT)
        if on_wait is not None and _begin_without_waiting(connection):
            return
        if on_wait is not None:
            on_wait()  # someone else holds the lock: say so before queueing behind them
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _begin_without_waiting(connection: Connection) -> bool:
    """``BEGIN IMMEDIATE`` if the write lock is free right now; False if another writer has it."""
    connection.exec_driver_sql("PRAGMA busy_timeout = 0")
    try:
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    except OperationalError as exc:
        if not _is_locked(exc):
            raise
        return False
    finally:
        connection.exec_driver_sql(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    return True


def first_line(exc: BaseException) -> str:
    """The driver's own message when there is one, without SQLAlchemy's decorations."""
    cause = getattr(exc, "orig", None) or exc
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]


def create_tracker_engine(url: str, **options: Any) -> Engine:
    """An engine for ``url`` with the tracker's per-backend settings (and SQLAlchemy's
    ``options``); no schema check."""
    url = normalize_url(url)
    try:
        engine = create_engine(url, **options)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise DatabaseUnavailable(url=url, reason=first_line(exc)) from None
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine)
    return engine


def current_revision(connection: Connection) -> str | None:
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


@contextmanager
def _schema_lock(engine: Engine) -> Iterator[Connection]:
    """A transaction holding the database's write lock (SQLite) or the tracker's advisory lock
    (PostgreSQL), so that concurrent first uses create the schema exactly once."""
    with engine.execution_options(**WRITE).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({SCHEMA_LOCK_ID})")
        yield connection


def _migrate(connection: Connection, direction: str, revision: str) -> None:
    from alembic import command  # lazy on purpose, as in alembic_config

    config = alembic_config()
    config.attributes["connection"] = connection  # env.py runs inside our transaction
    getattr(command, direction)(config, revision)


def upgrade(engine: Engine, revision: str = "head") -> None:
    with _schema_lock(engine) as connection:
        _migrate(connection, "upgrade", revision)


def downgrade(engine: Engine, revision: str) -> None:
    with _schema_lock(engine) as connection:
        _migrate(connection, "downgrade", revision)


@dataclass
class Upgrade:
    before: str | None  # None: the database was empty
    after: str
    backup: Path | None  # the copy taken first (SQLite files holding a schema)

    def outcome_line(self) -> str:
        if self.before == self.after:
            return f"already at {self.after}"
        saved = f" (the previous file is kept at {self.backup})" if self.backup else ""
        return f"upgraded {self.before or 'empty database'} -> {self.after}{saved}"


def backup_sqlite(engine: Engine, revision: str) -> Path:
    """A consistent copy of the database file beside it (SQLite's online backup, WAL-safe)."""
    database = engine.url.database
    assert database
    source = Path(database)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = source.with_name(f"{source.name}.{revision}-{stamp}.bak")
    with closing(sqlite3.connect(source)) as original, closing(sqlite3.connect(target)) as copy:
        original.backup(copy)
    return target


def upgrade_database(engine: Engine) -> Upgrade:
    """Bring a tracker database to this code's newest revision, safely.

    A SQLite file is first copied aside; the upgrade runs in one transaction, so a failing
    step leaves the database exactly as it was.
    """
    before = check_schema(engine, create=False)
    if before == HEAD:
        return Upgrade(before, HEAD, None)
    backup = None
    if before is not None and engine.dialect.name == "sqlite":
        backup = backup_sqlite(engine, before)
    try:
        upgrade(engine)
    except SQLAlchemyError as exc:
        url = engine.url.render_as_string(hide_password=True)
        raise UpgradeFailed(url=url, revision=before, reason=first_line(exc)) from None
    return Upgrade(before, HEAD, backup)


def _inspect_schema(connection: Connection, url: str) -> str | None:
    # Tables first, then the revision: a first use elsewhere commits the whole schema at once,
    # and on PostgreSQL each statement sees the commits made before it, so a revision looked
    # up first could be missing while the tables listed after it were already there.
    tables = inspect(connection).get_table_names()
    revision = current_revision(connection)
    if revision is None and tables:
        raise NotATrackerDatabase(url=url)
    if revision is not None and revision not in REVISIONS:
        raise UnknownRevision(url=url, revision=revision)
    return revision


def check_schema(engine: Engine, *, create: bool = True) -> str | None:
    """Refuse foreign or newer databases; create the schema in an empty one.

    Returns the revision the database is at afterwards (None: empty, not created).
    """
    url = engine.url.render_as_string(hide_password=True)
    with engine.connect() as connection:
        revision = _inspect_schema(connection, url)
    if revision is not None or not create:
        return revision
    with _schema_lock(engine) as connection:
        revision = _inspect_schema(connection, url)  # another process may have won the race
        if revision is None:
            _migrate(connection, "upgrade", "head")
    return HEAD


def refuse_missing_file(engine: Engine) -> None:
    """Only commands that store data create a SQLite file: elsewhere a mistyped path would
    silently become a new, empty database."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or url.query.get("uri"):
        return
    if url.database not in (None, "", ":memory:") and not Path(url.database).exists():
        raise NoSuchDatabase(path=url.database)


def sqlite_file(url: str) -> str | None:
    """The path of a SQLite database file named by ``url`` (plain or a ``file:`` URI); None
    for another backend or an in-memory database."""
    try:
        parsed = make_url(normalize_url(url))
    except ArgumentError:
        return None  # opening it says what is wrong
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    path = database.removeprefix("file:").split("?", 1)[0]
    return None if path in ("", ":memory:") else path


def read_only_uri(url: str, *, immutable: bool = False) -> str:
    """SQLite's ``file:`` URI opening the file of ``url`` read-only (``mode=ro``);
    ``immutable``: also without its ``-shm`` (see ``reads_only_as_immutable``)."""
    path = sqlite_file(url)
    if path is None:
        raise DatabaseUnavailable(url=url, reason="an in-memory database has nothing to read")
    return f"file:{quote(path)}?mode=ro{'&immutable=1' if immutable else ''}"


def read_only_url(url: str, *, immutable: bool = False) -> str:
    """``read_only_uri`` as SQLAlchemy's URL."""
    return f"sqlite:///{read_only_uri(url, immutable=immutable)}&uri=true"


def reads_only_as_immutable(url: str) -> bool:
    """Whether the SQLite file at ``url`` can be read only as immutable: a WAL database on
    read-only media, where SQLite can neither open nor create the ``-shm`` a reader needs.
    Immutable, SQLite takes no lock and never looks for other writers' changes, so it is
    used only then; a non-empty ``-wal`` (changes an immutable reader would miss) is refused.
    """
    path = sqlite_file(url)
    if path is None or not Path(path).is_file():
        return False
    try:
        with closing(sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True)) as connection:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return False
    except sqlite3.OperationalError as exc:
        if str(exc) != "unable to open database file":
            return False  # the ordinary open reports it
    wal = Path(f"{path}-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        reason = (
            "its -wal file holds changes that need a -shm file, which cannot be created "
            "here (read-only media?); open it once where it is writable first"
        )
        raise DatabaseUnavailable(url=url, reason=reason)
    return True


def open_database(url: str, *, may_create_file: bool = True) -> Engine:
    """The engine for a ready-to-use tracker database; an empty one is migrated first.

    Without ``may_create_file`` a SQLite file that does not exist is refused, and one on
    read-only media is opened immutable (only reading works then).
    """
    if not may_create_file and reads_only_as_immutable(url):
        engine = create_tracker_engine(read_only_url(url, immutable=True))
        require_head(engine, url, create=False)
        return engine
    engine = create_tracker_engine(url)
    if not may_create_file:
        refuse_missing_file(engine)
    require_head(engine, url, create=True)
    if engine.dialect.name == "sqlite":
        _use_wal(engine)
    return engine


def require_head(engine: Engine, url: str, *, create: bool) -> None:
    """Refuse (and dispose of) ``engine`` unless its schema is at this code's newest revision;
    with ``create``, an empty database is migrated first."""
    try:
        revision = check_schema(engine, create=create)
    except SQLAlchemyError as exc:
        engine.dispose()
        raise DatabaseUnavailable(url=url, reason=first_line(exc)) from None
    except Exception:
        engine.dispose()
        raise
    if revision != HEAD:
        engine.dispose()
        raise OutdatedSchema(url=url, revision=revision or "none (empty database)", head=HEAD)


def _use_wal(engine: Engine) -> None:
    if engine.url.database in (None, "", ":memory:"):
        return  # an in-memory database has no journal file
    # Persistent in the file, so set once the file is known to be ours, never on a foreign one.
    # Switching needs the file to itself: processes racing on a new file wait for each other.
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    connection = engine.raw_connection()
    try:
        cursor = connection.cursor()
        while cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                cursor.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError:
                if time.monotonic() >= deadline:
                    url = engine.url.render_as_string(hide_password=True)
                    seconds = round(SQLITE_BUSY_TIMEOUT_MS / 1000)
                    raise DatabaseBusy(url=url, seconds=seconds) from None
                time.sleep(0.05 + random.random() * 0.1)
    finally:
        connection.close()


def write_session(engine: Engine) -> Session:
    """A session whose transactions take the write lock at BEGIN (SQLite)."""
    return Session(engine.execution_options(**WRITE))


def _is_locked(exc: OperationalError) -> bool:
    return "database is locked" in str(exc.orig) or "database is busy" in str(exc.orig)


def in_write_transaction(
    engine: Engine, work: Callable[[Session], T], *, patience_s: float = WRITE_PATIENCE_S
) -> T:
    """Run ``work`` in one write transaction, as the commands' unit of work.

    SQLite writers queue on the lock (busy timeout) and are retried past it until
    ``patience_s``; a unique-key race lost to a concurrent writer (PostgreSQL) is retried
    once, so that the loser sees the winner's data and reports it as any later run would.
    Any other database failure (a full disk, a read-only or damaged file) is one
    ``DatabaseFailed``; the transaction is rolled back either way.
    """
    start = time.monotonic()
    raced = False
    while True:
        try:
            with write_session(engine) as session, session.begin():
                return work(session)
        except OperationalError as exc:
            if not _is_locked(exc):
                raise DatabaseFailed(reason=first_line(exc)) from None
            waited = time.monotonic() - start
            if waited >= patience_s:
                url = engine.url.render_as_string(hide_password=True)
                raise DatabaseBusy(url=url, seconds=round(waited)) from None
            engine = engine.execution_options(**{ON_LOCK_WAIT: None})  # the wait was told once
            time.sleep(0.05 + random.random() * 0.2)
        except IntegrityError as exc:
            if raced:
                raise DatabaseFailed(reason=first_line(exc)) from None
            raced = True
        except DBAPIError as exc:
            raise DatabaseFailed(reason=first_line(exc)) from None
