"""The server's database connection: read-only by the database's own means.

SQLite: the file is opened with ``mode=ro`` and the authorizer of ``tracker sql`` allows
reading (plus BEGIN/COMMIT, so a request reads one snapshot, and the schema's
pragmas) and nothing else. PostgreSQL:
every session starts with ``default_transaction_read_only``, so any write is refused by the
server itself. No endpoint writes; these guards make a bug that tried fail loudly.

A request reads one snapshot on both: on PostgreSQL its transactions are ``REPEATABLE READ``
(a read-only one never fails to serialize), so the cache key a request reads and the result
it caches under that key come from the same state of the database.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import Engine, event, make_url

from tracker.store.db import (
    create_tracker_engine,
    read_only_url,
    reads_only_as_immutable,
    require_head,
)
from tracker.store.readonly import SQLITE_READS, sqlite_authorizer

STATEMENT_TIMEOUT_MS = 60_000
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
    engine = create_tracker_engine(_read_only_url(url))
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
