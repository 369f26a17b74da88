"""Engines and the schema's lifecycle: connect, check the Alembic revision, upgrade.

SQLite databases run in WAL mode, with a busy timeout, so that several processes can ingest
into one file; write transactions start with ``BEGIN IMMEDIATE`` so that a writer waits for
the lock up front instead of failing half-way with "database is locked".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from tracker.errors import (
    DatabaseUnavailable,
    NotATrackerDatabase,
    OutdatedSchema,
    UnknownRevision,
)

SQLITE_BUSY_TIMEOUT_MS = 60_000
WRITE = {"tracker_write": True}


def _migrations_dir() -> Path:
    # A wheel carries the scripts inside the package; a source checkout has them at the top.
    package = Path(__file__).resolve().parent.parent
    inside = package / "migrations"
    return inside if inside.is_dir() else package.parent / "migrations"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_migrations_dir()))
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


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
        immediate = connection.get_execution_options().get("tracker_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def first_line(exc: BaseException) -> str:
    """The driver's own message when there is one, without SQLAlchemy's decorations."""
    cause = getattr(exc, "orig", None) or exc
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]


def create_tracker_engine(url: str) -> Engine:
    """An engine for ``url`` with the tracker's per-backend settings; no schema check."""
    try:
        engine = create_engine(url)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise DatabaseUnavailable(url=url, reason=first_line(exc)) from None
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine)
    return engine


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    with engine.connect() as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        connection.commit()


def downgrade(engine: Engine, revision: str) -> None:
    with engine.connect() as connection:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
        connection.commit()


def check_schema(engine: Engine, *, create: bool = True) -> str | None:
    """Refuse foreign or newer databases; create the schema in an empty one.

    Returns the revision the database is at afterwards.
    """
    url = engine.url.render_as_string(hide_password=True)
    known = {
        script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()
    }
    with engine.connect() as connection:
        revision = current_revision(connection)
        tables = inspect(connection).get_table_names()
    if revision is None:
        if tables:
            raise NotATrackerDatabase(url=url)
        if not create:
            return None
        upgrade(engine)
        return head_revision()
    if revision not in known:
        raise UnknownRevision(url=url, revision=revision)
    return revision


def open_database(url: str) -> Engine:
    """The engine for a ready-to-use tracker database; an empty one is migrated first."""
    engine = create_tracker_engine(url)
    try:
        revision = check_schema(engine)
    except SQLAlchemyError as exc:
        engine.dispose()
        raise DatabaseUnavailable(url=url, reason=first_line(exc)) from None
    except Exception:
        engine.dispose()
        raise
    head = head_revision()
    if revision != head:
        engine.dispose()
        raise OutdatedSchema(url=url, revision=revision, head=head)
    if engine.dialect.name == "sqlite":
        _use_wal(engine)
    return engine


def _use_wal(engine: Engine) -> None:
    # Persistent in the file, so set once the file is known to be ours, never on a foreign one.
    connection = engine.raw_connection()
    try:
        connection.cursor().execute("PRAGMA journal_mode = WAL")
    finally:
        connection.close()


def write_session(engine: Engine) -> Session:
    """A session whose transactions take the write lock at BEGIN (SQLite)."""
    return Session(engine.execution_options(**WRITE))
