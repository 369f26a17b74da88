"""Engines with the tracker's per-backend settings.

SQLite databases run in WAL mode, with a busy timeout, so that several processes can ingest
into one file; write transactions start with ``BEGIN IMMEDIATE`` so that a writer waits for
the lock up front instead of failing half-way with "database is locked".
"""

from __future__ import annotations

import random
import sqlite3
import time
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from tracker.config import normalize_url
from tracker.errors import DatabaseBusy, DatabaseUnavailable

SQLITE_BUSY_TIMEOUT_MS = 60_000
WRITE = {"tracker_write": True}
# Execution option: a callable run when a SQLite write has to queue behind another writer.
ON_LOCK_WAIT = "tracker_on_lock_wait"
# Execution option: PostgreSQL sends the rows in its binary format (bytes as bytes, not as hex
# text the driver decodes: half the bytes, a third of the CPU), for the readers of the driver's
# rows (``tracker.store.raw_rows``), whose column types all load alike in either format.
BINARY_ROWS = "tracker_binary_rows"


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
        if not is_locked(exc):
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
    if url.startswith("postgresql+psycopg://"):
        # no HSTORE column anywhere: spares each engine's first connection a pg_type look-up
        options = {"use_native_hstore": False, **options}
    try:
        engine = create_engine(url, **options)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise DatabaseUnavailable(url=url, reason=first_line(exc)) from None
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine)
    elif engine.dialect.name == "postgresql":
        _configure_postgresql(engine)
    return engine


def _configure_postgresql(engine: Engine) -> None:
    # many rows' INSERT as one statement of many VALUES, as SQLAlchemy's psycopg2 dialect
    # sends it: psycopg's executemany has the server parse and run a statement a row
    engine.dialect.use_insertmanyvalues_wo_returning = True

    from psycopg.pq import Format  # the engine's driver: imported by now

    @event.listens_for(engine, "before_cursor_execute")
    def binary_rows(_c: Any, cursor: Any, _s: Any, _p: Any, context: Any, _m: Any) -> None:
        if context is not None and context.execution_options.get(BINARY_ROWS):
            cursor.format = Format.BINARY


def use_wal(engine: Engine) -> None:
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


def is_locked(exc: OperationalError) -> bool:
    return "database is locked" in str(exc.orig) or "database is busy" in str(exc.orig)
