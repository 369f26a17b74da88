"""The schema's lifecycle: check the Alembic revision, migrate, upgrade safely, and open a
database that is at this code's newest revision.

Alembic's ``ScriptDirectory`` lists the revisions of ``migrations/``; only ``HEAD``, the newest,
is named here, so that a command whose database is at it never imports Alembic (~0.3 s, and
every migration script): a test checks that it is the scripts' head.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from tracker.errors import (
    DatabaseUnavailable,
    NotATrackerDatabase,
    OutdatedSchema,
    UnknownRevision,
    UpgradeFailed,
)
from tracker.store.engine import WRITE, create_tracker_engine, first_line, use_wal
from tracker.store.sqlite_files import (
    read_only_url,
    reads_only_as_immutable,
    refuse_missing_file,
)

if TYPE_CHECKING:
    from alembic.config import Config

HEAD = "0021"
SCHEMA_LOCK_ID = 0x7472_6163  # "trac": the advisory lock serialising schema changes


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


@cache
def revisions() -> tuple[str, ...]:
    """Every revision of ``migrations/``, oldest first, as Alembic's scripts list them."""
    from alembic.script import ScriptDirectory  # lazy on purpose, as in alembic_config

    scripts = ScriptDirectory.from_config(alembic_config())
    return tuple(reversed([script.revision for script in scripts.walk_revisions()]))


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
    if revision is not None and revision != HEAD and revision not in revisions():
        raise UnknownRevision(url=url, revision=revision)
    return revision


def _revision_at_once(connection: Connection) -> str | None:
    """The revision in one statement, as every command asks it first (PostgreSQL's catalog
    inspected instead costs a command about 20 ms); None when it cannot say (no such table).
    Only HEAD is taken as it is: the schema of a revision is committed whole, with it."""
    try:
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except DBAPIError:
        connection.rollback()  # PostgreSQL ends the failed transaction's statements
        return None


def check_schema(engine: Engine, *, create: bool = True) -> str | None:
    """Refuse foreign or newer databases; create the schema in an empty one.

    Returns the revision the database is at afterwards (None: empty, not created).
    """
    url = engine.url.render_as_string(hide_password=True)
    with engine.connect() as connection:
        revision = _revision_at_once(connection)
        if revision != HEAD:
            revision = _inspect_schema(connection, url)
    if revision is not None or not create:
        return revision
    with _schema_lock(engine) as connection:
        revision = _inspect_schema(connection, url)  # another process may have won the race
        if revision is None:
            _migrate(connection, "upgrade", "head")
    return HEAD


def open_database(
    url: str,
    *,
    may_create_file: bool = True,
    engine_of: Callable[[str], Engine] = create_tracker_engine,
) -> Engine:
    """The engine for a ready-to-use tracker database; an empty one is migrated first.

    Without ``may_create_file`` a SQLite file that does not exist is refused, and one on
    read-only media is opened immutable (only reading works then). ``engine_of``: what makes
    the engine of a URL (one kept for the process, say); the checks run whichever.
    """
    if not may_create_file and reads_only_as_immutable(url):
        engine = engine_of(read_only_url(url, immutable=True))
        require_head(engine, url, create=False)
        return engine
    engine = engine_of(url)
    if not may_create_file:
        refuse_missing_file(engine)
    require_head(engine, url, create=True)
    if engine.dialect.name == "sqlite":
        use_wal(engine)
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
