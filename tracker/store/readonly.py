"""``tracker sql``: one statement, read-only, enforced by the database connection itself.

SQLite: the file is opened read-only (``mode=ro``) and an authorizer allows reading and
nothing else, so ATTACH, PRAGMA writes and ``load_extension`` are refused by SQLite.
PostgreSQL: a READ ONLY transaction, a single statement (a prepared statement cannot hold
two), the privileges of ``pg_read_all_data`` where the role may take them, rolled back; and
never as a superuser, who could undo all of that from within the statement.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import make_url

from tracker.errors import SqlRefused
from tracker.store.engine import create_tracker_engine, first_line
from tracker.store.sqlite_files import read_only_uri, reads_only_as_immutable

STATEMENT_TIMEOUT_S = 60.0
QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement stopped by statement_timeout
# SQLite asks the progress handler every this many virtual machine steps (~0.1 ms of work).
PROGRESS_STEPS = 10_000
# A superuser can leave any guard set inside its own session (a DO block can SET ROLE back).
SUPERUSER = "superusers can leave any read-only guard; connect as a role without superuser rights"
SQLITE_READS = frozenset(
    {
        sqlite3.SQLITE_SELECT,
        sqlite3.SQLITE_READ,
        sqlite3.SQLITE_FUNCTION,
        sqlite3.SQLITE_RECURSIVE,
    }
)
SQLITE_REFUSED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
# What each backend says of the point table, gone since revision 0007, and where its rows went.
NO_POINT_TABLE = ("no such table: point", 'relation "point" does not exist')
POINTS_MOVED = (
    "curve points are no longer rows of a table but compressed chunks (curve_chunk); read "
    "them with `tracker query curve`, or write them as Parquet with `tracker export DIR` and "
    "query that"
)


def _stored_time(raw: bytes) -> datetime | str:
    """A DATETIME column's text (SQLAlchemy writes UTC) as a datetime, so that it is shown as
    every listing shows times; text that is no time stays text."""
    text = raw.decode("utf-8", "replace")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return text
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# Only connections opened with PARSE_DECLTYPES (tracker sql's, below) use converters.
sqlite3.register_converter("DATETIME", _stored_time)


@dataclass
class SqlResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]

    def as_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def sqlite_authorizer(allowed: frozenset[int]) -> Callable[..., int]:
    """An SQLite authorizer allowing the ``allowed`` actions and no dangerous function."""

    def authorize(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in SQLITE_REFUSED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK if action in allowed else sqlite3.SQLITE_DENY

    return authorize


_sqlite_authorizer = sqlite_authorizer(SQLITE_READS)


def _over_time(timeout_s: float) -> SqlRefused:
    """The same words on both backends for a statement stopped at the limit."""
    return SqlRefused(
        reason=f"the statement ran past the time limit of {timeout_s:g} s (--timeout)"
    )


def _run_sqlite(url: str, sql: str, timeout_s: float) -> SqlResult:
    uri = read_only_uri(url, immutable=reads_only_as_immutable(url))
    try:
        connection = sqlite3.connect(uri, uri=True, detect_types=sqlite3.PARSE_DECLTYPES)
    except sqlite3.Error as exc:
        raise SqlRefused(reason=str(exc)) from None
    try:
        connection.set_authorizer(_sqlite_authorizer)
        deadline = time.monotonic() + timeout_s
        # a true answer interrupts the statement: SQLite's stand-in for a statement_timeout
        connection.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        try:
            cursor = connection.execute(sql)
            rows = cursor.fetchall()
        except sqlite3.OperationalError as exc:
            if str(exc) == "interrupted":
                raise _over_time(timeout_s) from None
            raise SqlRefused(reason=_sqlite_reason(exc)) from None
        except sqlite3.DatabaseError as exc:
            raise SqlRefused(reason=_sqlite_reason(exc)) from None
        return SqlResult([d[0] for d in cursor.description or []], rows)
    finally:
        connection.close()


def _points_moved(reason: str) -> str | None:
    return f"{reason}: {POINTS_MOVED}" if reason.strip() in NO_POINT_TABLE else None


def _sqlite_reason(exc: sqlite3.DatabaseError) -> str:
    message = str(exc)
    if moved := _points_moved(message):
        return moved
    if "one statement at a time" in message:
        return "give one statement at a time"
    if message in ("not authorized", "attempt to write a readonly database"):
        return f"{message}: tracker sql only reads"
    return message


def _run_postgres(url: str, sql: str, timeout_s: float) -> SqlResult:
    engine = create_tracker_engine(url)
    try:
        with engine.connect() as connection:
            dbapi = connection.connection.driver_connection
            assert dbapi is not None
            with dbapi.cursor() as cursor:  # type: ignore[attr-defined]
                cursor.execute(
                    "SELECT session_user, rolsuper FROM pg_roles WHERE rolname = session_user"
                )
                user, superuser = cursor.fetchone()
                if superuser:
                    dbapi.rollback()
                    raise SqlRefused(
                        reason=f"will not run as PostgreSQL superuser {user!r}: {SUPERUSER}"
                    )
                cursor.execute("BEGIN READ ONLY")
                milliseconds = max(1, round(timeout_s * 1000))  # 0 would mean no limit
                cursor.execute(f"SET LOCAL statement_timeout = {milliseconds}")
                cursor.execute(  # a role that may read everything and nothing more
                    "SELECT 1 FROM pg_roles WHERE rolname = 'pg_read_all_data' "
                    "AND pg_has_role(current_user, 'pg_read_all_data', 'MEMBER')"
                )
                if cursor.fetchone() is not None:
                    cursor.execute("SET LOCAL ROLE pg_read_all_data")
                try:
                    cursor.execute(sql, prepare=True)
                    rows = cursor.fetchall() if cursor.description else []
                    columns = [d.name for d in cursor.description or []]
                except Exception as exc:  # the driver's error is the user's message
                    if getattr(exc, "sqlstate", None) == QUERY_CANCELED:
                        raise _over_time(timeout_s) from None
                    raise SqlRefused(reason=_postgres_reason(exc)) from None
                finally:
                    dbapi.rollback()
            return SqlResult(columns, rows)
    finally:
        engine.dispose()


def _postgres_reason(exc: Exception) -> str:
    reason = first_line(exc)
    if moved := _points_moved(reason):
        return moved
    if "read-only transaction" in reason or "permission denied" in reason:
        return f"{reason}: tracker sql only reads"
    if "multiple commands" in reason:
        return "give one statement at a time"
    return reason


def run_readonly_sql(url: str, sql: str, timeout_s: float = STATEMENT_TIMEOUT_S) -> SqlResult:
    """Run one read-only statement against the tracker database at ``url``, stopped after
    ``timeout_s`` seconds on either backend."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database:
            raise SqlRefused(reason="an in-memory database has nothing to query")
        return _run_sqlite(url, sql, timeout_s)
    return _run_postgres(url, sql, timeout_s)
