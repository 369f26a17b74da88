"""Reading only, enforced by the database connection itself: ``tracker sql``'s one statement
(``run_readonly_sql``) and the server's engine (``read_only_engine``), both stopped after
``STATEMENT_TIMEOUT_S``.

``tracker sql``: SQLite: the file is opened read-only (``mode=ro``) and an authorizer allows
reading and nothing else, so ATTACH, PRAGMA writes and ``load_extension`` are refused by
SQLite. PostgreSQL: a READ ONLY transaction, a single statement (a prepared statement cannot
hold two), the privileges of ``pg_read_all_data`` where the role may take them, rolled back;
and never as a superuser, who could undo all of that from within the statement.

The server's engine: SQLite: ``mode=ro`` and the same authorizer, allowing also BEGIN/COMMIT
(so a request reads one snapshot), the schema's pragmas and what ``json_each`` asks as it
declares its columns (``tracker.store.value_lists``). PostgreSQL: every session starts
with ``default_transaction_read_only``, so any write is refused by the server itself, and its
transactions are ``REPEATABLE READ`` (a read-only one never fails to serialize).

Bounded end to end, not just the statement: rows are fetched one by one (SQLite's cursor,
PostgreSQL's single-row mode), counted against ``max_rows`` and ``max_bytes`` as they come
and against the time limit, which the caller's rendering is held to too (``SqlResult.check_time``);
SQLite refuses any value longer than ``max_bytes`` as it makes it (``SQLITE_LIMIT_LENGTH``),
and PostgreSQL any row larger than it before sending it (``_row_bounded``: the client never
receives, nor holds, a row past the limit; a 900 MB value cost 2.7 GB and 47 s before).
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, event, make_url

from tracker.config import MAX_BYTES, MAX_ROWS, STATEMENT_TIMEOUT_S
from tracker.errors import SqlRefused
from tracker.jobdir.limits import size_text
from tracker.store.engine import create_tracker_engine, first_line
from tracker.store.schema import require_head
from tracker.store.sqlite_files import read_only_uri, read_only_url, reads_only_as_immutable

PGRESULT_COMMAND_OK = 1  # libpq's PGRES_COMMAND_OK
# what PostgreSQL says when a row is past --max-bytes (``_row_bounded``): a failed cast, of
# text made from the row (a constant would be cast, and fail, as the statement is planned)
ROW_TOO_LARGE = "tracker sql: a row past --max-bytes"
TRAILING = re.compile(r"[\s;]+$")
NO_RESULT = "didn't produce a result"  # psycopg's words for a statement giving no rows
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


@dataclass(frozen=True)
class SqlLimits:
    """How long, how many rows and how many bytes one ``tracker sql`` may take."""

    timeout_s: float = STATEMENT_TIMEOUT_S
    max_rows: int = MAX_ROWS
    max_bytes: int = MAX_BYTES


DEFAULT_LIMITS = SqlLimits()


@dataclass
class SqlResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    deadline: float = float("inf")  # time.monotonic() by which rendering it must be done
    timeout_s: float = STATEMENT_TIMEOUT_S

    def as_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def check_time(self) -> None:
        """``SqlRefused`` once the time limit has passed (after rendering, before printing)."""
        if time.monotonic() > self.deadline:
            raise _over_time(self.timeout_s)


def _size(value: object) -> int:
    return len(value) if isinstance(value, str | bytes | bytearray | memoryview) else 8


def _bounded(rows: Iterable[tuple[Any, ...]], limits: SqlLimits, deadline: float) -> list[Any]:
    """The rows, taken one at a time, refused past any limit as soon as it is passed."""
    taken: list[tuple[Any, ...]] = []
    size = 0
    for row in rows:
        if len(taken) == limits.max_rows:
            raise SqlRefused(reason=f"the result has more than {limits.max_rows} rows (--max-rows)")
        size += sum(_size(value) for value in row)
        if size > limits.max_bytes:
            raise _too_large(limits)
        if time.monotonic() > deadline:
            raise _over_time(limits.timeout_s)
        taken.append(tuple(row))
    return taken


def _too_large(limits: SqlLimits) -> SqlRefused:
    return SqlRefused(
        reason=f"the result is larger than {size_text(limits.max_bytes)} (--max-bytes)"
    )


def sqlite_authorizer(allowed: frozenset[int]) -> Callable[..., int]:
    """An SQLite authorizer allowing the ``allowed`` actions and no dangerous function."""

    def authorize(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in SQLITE_REFUSED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK if action in allowed else sqlite3.SQLITE_DENY

    return authorize


_sqlite_authorizer = sqlite_authorizer(SQLITE_READS)
# Reading the schema (the revision check) asks these pragmas; they only describe tables.
SCHEMA_PRAGMAS = frozenset({"table_info", "table_xinfo", "table_list", "index_list"})
_engine_reads = sqlite_authorizer(SQLITE_READS | {sqlite3.SQLITE_TRANSACTION})


def _engine_authorizer(action: int, arg1: str | None, arg2: str | None, *rest: object) -> int:
    if action == sqlite3.SQLITE_PRAGMA:
        return sqlite3.SQLITE_OK if arg1 in SCHEMA_PRAGMAS else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
        # asked as json_each (tracker.store.value_lists) declares its columns (SQLite 3.40);
        # no statement can write the schema: the file is read-only, writable_schema refused
        return sqlite3.SQLITE_OK
    return _engine_reads(action, arg1, arg2, *rest)


def read_only_engine(url: str, **options: Any) -> Engine:
    """An engine that can only read the tracker database at ``url`` (at the newest schema),
    each statement stopped after ``STATEMENT_TIMEOUT_S``; a SQLite file on read-only media is
    read immutable. ``options`` go to SQLAlchemy (the pool's size)."""
    sqlite = make_url(url).get_backend_name() == "sqlite"
    opened = read_only_url(url, immutable=reads_only_as_immutable(url)) if sqlite else url
    engine = create_tracker_engine(opened, **options)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def guard_sqlite(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.set_authorizer(_engine_authorizer)

    else:
        milliseconds = round(STATEMENT_TIMEOUT_S * 1000)

        @event.listens_for(engine, "connect")
        def guard_postgres(dbapi_connection: Any, _record: Any) -> None:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("SET SESSION default_transaction_read_only = on")
                cursor.execute("SET SESSION default_transaction_isolation = 'repeatable read'")
                cursor.execute(f"SET SESSION statement_timeout = {milliseconds}")
            dbapi_connection.commit()

    require_head(engine, url, create=False)
    return engine


def _over_time(timeout_s: float) -> SqlRefused:
    """The same words on both backends for a statement stopped at the limit."""
    return SqlRefused(
        reason=f"the statement ran past the time limit of {timeout_s:g} s (--timeout)"
    )


def _run_sqlite(url: str, sql: str, limits: SqlLimits) -> SqlResult:
    uri = read_only_uri(url, immutable=reads_only_as_immutable(url))
    try:
        connection = sqlite3.connect(uri, uri=True, detect_types=sqlite3.PARSE_DECLTYPES)
    except sqlite3.Error as exc:
        raise SqlRefused(reason=str(exc)) from None
    try:
        connection.set_authorizer(_sqlite_authorizer)
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1, limits.max_bytes))
        deadline = time.monotonic() + limits.timeout_s
        # a true answer interrupts the statement: SQLite's stand-in for a statement_timeout
        connection.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        try:
            cursor = connection.execute(sql)
            rows = _bounded(cursor, limits, deadline)
        except sqlite3.OperationalError as exc:
            if str(exc) == "interrupted":
                raise _over_time(limits.timeout_s) from None
            raise SqlRefused(reason=_sqlite_reason(exc)) from None
        except sqlite3.DataError as exc:  # a value past SQLITE_LIMIT_LENGTH
            if "too big" in str(exc):
                raise _too_large(limits) from None
            raise SqlRefused(reason=_sqlite_reason(exc)) from None
        except sqlite3.DatabaseError as exc:
            raise SqlRefused(reason=_sqlite_reason(exc)) from None
        columns = [d[0] for d in cursor.description or []]
        return SqlResult(columns, rows, deadline, limits.timeout_s)
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


def _run_postgres(url: str, sql: str, limits: SqlLimits) -> SqlResult:
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
                deadline = time.monotonic() + limits.timeout_s
                milliseconds = max(1, round(limits.timeout_s * 1000))  # 0 would mean no limit
                cursor.execute(f"SET LOCAL statement_timeout = {milliseconds}")
                cursor.execute(  # a role that may read everything and nothing more
                    "SELECT 1 FROM pg_roles WHERE rolname = 'pg_read_all_data' "
                    "AND pg_has_role(current_user, 'pg_read_all_data', 'MEMBER')"
                )
                if cursor.fetchone() is not None:
                    cursor.execute("SET LOCAL ROLE pg_read_all_data")
                # single-row mode, one statement (as a prepared one): rows as they come
                stream = cursor.stream(_row_bounded(dbapi, sql, limits.max_bytes))
                try:
                    rows = _bounded(stream, limits, deadline)
                    columns = [d.name for d in cursor.description or []] or _described(dbapi, sql)
                except SqlRefused:
                    raise
                except Exception as exc:  # the driver's error is the user's message
                    if getattr(exc, "sqlstate", None) == QUERY_CANCELED:
                        raise _over_time(limits.timeout_s) from None
                    if ROW_TOO_LARGE in str(exc):
                        raise _too_large(limits) from None
                    raise SqlRefused(reason=_postgres_reason(exc)) from None
                finally:
                    stream.close()  # cancels what is still coming, and frees the connection
                    dbapi.rollback()
            return SqlResult(columns, rows, deadline, limits.timeout_s)
    finally:
        engine.dispose()


def _row_bounded(dbapi: Any, sql: str, max_bytes: int) -> str:
    """``sql`` as a subquery whose rows the server refuses past ``max_bytes`` before sending
    them, when it is one (a query of rows); else (``EXPLAIN``, ``SHOW``, a ``DO`` block: small
    or no answers) as it is. Tried by preparing it, inside a savepoint: a statement that is no
    subquery fails to parse and leaves the transaction as it was."""
    body = TRAILING.sub("", sql)
    wrapped = (
        f"SELECT q.* FROM (\n{body}\n) AS q WHERE CASE WHEN pg_column_size(q.*) > {max_bytes}"
        f" THEN ('{ROW_TOO_LARGE}: ' || pg_column_size(q.*))::int ELSE 1 END = 1"
    )
    with dbapi.cursor() as cursor:
        cursor.execute("SAVEPOINT tracker_bounded")
        pgconn = dbapi.pgconn
        prepared = pgconn.prepare(b"tracker_bounded", wrapped.encode()).status
        if prepared != PGRESULT_COMMAND_OK:
            cursor.execute("ROLLBACK TO SAVEPOINT tracker_bounded")
            return sql
        cursor.execute("DEALLOCATE tracker_bounded")
        cursor.execute("RELEASE SAVEPOINT tracker_bounded")
    return wrapped


def _described(dbapi: Any, sql: str) -> list[str]:
    """The columns of a statement that gave no row (single-row mode then tells none): from
    the server's description of it, prepared, not run."""
    pgconn = dbapi.pgconn
    if pgconn.prepare(b"tracker_sql", sql.encode()).status != PGRESULT_COMMAND_OK:
        return []
    described = pgconn.describe_prepared(b"tracker_sql")
    return [described.fname(i).decode() for i in range(described.nfields)]


def _postgres_reason(exc: Exception) -> str:
    reason = first_line(exc)
    if moved := _points_moved(reason):
        return moved
    if "read-only transaction" in reason or "permission denied" in reason:
        return f"{reason}: tracker sql only reads"
    if "multiple commands" in reason:
        return "give one statement at a time"
    if NO_RESULT in reason:
        return (
            "the statement returns no rows (a DO block, or another command): tracker sql runs"
            " one query and shows its rows"
        )
    return reason


def run_readonly_sql(url: str, sql: str, limits: SqlLimits = DEFAULT_LIMITS) -> SqlResult:
    """Run one read-only statement against the tracker database at ``url``, stopped past
    ``limits`` (time, rows, bytes) on either backend."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database:
            raise SqlRefused(reason="an in-memory database has nothing to query")
        return _run_sqlite(url, sql, limits)
    return _run_postgres(url, sql, limits)
