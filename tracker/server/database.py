"""The server's database connection: read-only by the database's own means.

SQLite: the file is opened with ``mode=ro`` and the authorizer of ``tracker sql`` allows
reading (plus BEGIN/COMMIT, so a request reads one snapshot, and the schema's
pragmas) and nothing else. PostgreSQL:
every session starts with ``default_transaction_read_only``, so any write is refused by the
server itself. No endpoint writes; these guards make a bug that tried fail loudly.

A SQLite file replaced or removed while serving is noticed by the next request
(``ServedDatabase``). A request reads one snapshot on both: on PostgreSQL its transactions
are ``REPEATABLE READ`` (a read-only one never fails to serialize), so the cache key a
request reads and the result it caches under that key come from the same state of the
database.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Any

from sqlalchemy import Engine, event, make_url

from tracker.errors import DatabaseGone, DatabaseUnavailable
from tracker.store.engine import create_tracker_engine
from tracker.store.readonly import SQLITE_READS, sqlite_authorizer
from tracker.store.schema import require_head
from tracker.store.sqlite_files import read_only_url, reads_only_as_immutable, sqlite_file

STATEMENT_TIMEOUT_MS = 60_000
# Routes run in anyio's worker threads, at most 40 at once, each with a session: a pool as
# large, so that requests queued behind one heavy computation never time out on the pool.
REQUEST_THREADS = 40
# Reading the schema (the revision check) asks these pragmas; they only describe tables.
SCHEMA_PRAGMAS = frozenset({"table_info", "table_xinfo", "table_list", "index_list"})
_reads = sqlite_authorizer(SQLITE_READS | {sqlite3.SQLITE_TRANSACTION})


def _authorize(action: int, arg1: str | None, arg2: str | None, *rest: object) -> int:
    if action == sqlite3.SQLITE_PRAGMA:
        return sqlite3.SQLITE_OK if arg1 in SCHEMA_PRAGMAS else sqlite3.SQLITE_DENY
    return _reads(action, arg1, arg2, *rest)


def _read_only_url(url: str) -> str:
    if make_url(url).get_backend_name() != "sqlite":
        return url
    return read_only_url(url, immutable=reads_only_as_immutable(url))


def open_read_only(url: str) -> Engine:
    """An engine that can only read the tracker database at ``url`` (at the newest schema);
    a SQLite file on read-only media is read immutable."""
    engine = create_tracker_engine(_read_only_url(url), pool_size=REQUEST_THREADS)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def guard_sqlite(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.set_authorizer(_authorize)

    else:

        @event.listens_for(engine, "connect")
        def guard_postgres(dbapi_connection: Any, _record: Any) -> None:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("SET SESSION default_transaction_read_only = on")
                cursor.execute("SET SESSION default_transaction_isolation = 'repeatable read'")
                cursor.execute(f"SET SESSION statement_timeout = {STATEMENT_TIMEOUT_MS}")
            dbapi_connection.commit()

    require_head(engine, url, create=False)
    return engine


class ServedDatabase:
    """The engine on the database file that is at the served path now.

    Each request compares the file's identity (device and inode) with the one opened: a
    file replaced at the path (deleted and ingested anew, or moved over) is opened again,
    and while no file is there every request is one ``DatabaseGone`` (503). A descriptor
    held on the opened file keeps its inode allocated, so a new file can never reuse its
    number. PostgreSQL has no file: its engine is used as it is.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = sqlite_file(url)
        self._lock = threading.Lock()
        self._held: int | None = None  # a descriptor on the opened file
        self._identity: tuple[int, int] | None = None  # its device and inode
        self._engine: Engine | None = None
        self._open()

    def _open(self) -> None:
        if self.path is None:
            self._engine = open_read_only(self.url)
            return
        try:
            held = os.open(self.path, os.O_RDONLY)
        except OSError as exc:
            raise DatabaseUnavailable(url=self.url, reason=exc.strerror or str(exc)) from None
        try:
            engine = open_read_only(self.url)
        except BaseException:
            os.close(held)
            raise
        self.close()
        opened = os.fstat(held)
        self._held, self._identity, self._engine = held, (opened.st_dev, opened.st_ino), engine

    def _identity_now(self) -> tuple[int, int] | None:
        assert self.path is not None
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return None
        return now.st_dev, now.st_ino

    def engine(self) -> Engine:
        """The engine on the file now at the path; ``DatabaseGone`` while there is none."""
        engine = self._engine
        if self.path is None or (engine is not None and self._identity_now() == self._identity):
            assert engine is not None
            return engine
        with self._lock:
            identity = self._identity_now()
            if identity is None:
                self.close()  # nothing of the removed file is kept open
                raise DatabaseGone(path=self.path)
            if identity != self._identity or self._engine is None:
                self._open()
            assert self._engine is not None
            return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        if self._held is not None:
            os.close(self._held)
            self._held, self._identity = None, None
