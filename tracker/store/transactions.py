"""The commands' unit of work: one write transaction, waiting for the lock and retried."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from tracker.errors import DatabaseBusy, DatabaseFailed
from tracker.models import Base
from tracker.store.engine import ON_LOCK_WAIT, WRITE, first_line, is_locked

WRITE_PATIENCE_S = 900.0
T = TypeVar("T")
TABLES = tuple(Base.metadata.tables)  # the tracker's own, in the schema the URL names


def write_session(engine: Engine) -> Session:
    """A session whose transactions take the write lock at BEGIN (SQLite)."""
    return Session(engine.execution_options(**WRITE))


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
            if not is_locked(exc):
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


def refresh_statistics(engine: Engine) -> None:
    """The query planner's statistics of the tracker's tables brought up to date, after a
    bulk write (ingest, sync, copy): PostgreSQL plans from ``ANALYZE`` (autovacuum runs it
    late, and a plan made for a tenth of the rows sorts the verdicts on disk); SQLite's
    ``PRAGMA optimize`` analyses the tables whose statistics are stale, if any.

    It writes, so it queues for the lock as a write does: in a plain (deferred) SQLite
    transaction, a read turned write behind another writer fails at once, without waiting."""

    def analyse(session: Session) -> None:
        connection = session.connection()
        if connection.dialect.name == "postgresql":
            tables = ", ".join(connection.dialect.identifier_preparer.quote(t) for t in TABLES)
            connection.exec_driver_sql(f"ANALYZE {tables}")
        else:
            connection.exec_driver_sql("PRAGMA optimize")

    in_write_transaction(engine, analyse)
