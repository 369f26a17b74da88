"""Query results as the driver's own rows, where the selected columns' types allow: without
polars, so that commands that show no frame never import it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import groupby, islice
from operator import itemgetter
from typing import Any, Generic, TypeVar, cast

from sqlalchemy import BigInteger, Integer, LargeBinary, String, Table, Text
from sqlalchemy.orm import Session

from tracker.models import Base, ExactFloat
from tracker.store.engine import BINARY_ROWS

T = TypeVar("T")

# column types whose values the drivers (sqlite3, psycopg) return as the Python values
RAW_TYPES = (Integer, BigInteger, String, Text, ExactFloat, LargeBinary)


def plain_rows(
    session: Session, query: Any, parameters: Mapping[str, Any] | None = None
) -> Sequence[Any]:
    """Run a Core ``select`` on the session's connection (flushed first, as the session's own
    execute would) and return its rows without the ORM's loading. When every column's type
    is in ``RAW_TYPES`` the rows are the driver's own, with SQLite's text 'NaN' of an
    ExactFloat column read as a float: converting every value through SQLAlchemy costs more
    than the query for thousands of rows."""
    types = [column.type for column in query.selected_columns]
    if not all(isinstance(t, RAW_TYPES) for t in types):
        session.flush()
        return session.connection().execute(query, parameters).all()
    rows = driver_rows(session, query, parameters)
    exact = [i for i, t in enumerate(types) if isinstance(t, ExactFloat)]
    return [_exact_floats(row, exact) for row in rows] if exact else rows


# rows a streamed read fetches at once: well under a MB of tuples, whatever the number of jobs;
# of rows that each hold an encoded document or curve chunk (up to ~130 kB), about a MB
STREAMED_ROWS = 1_000
STREAMED_BLOBS = 8


def streamed_rows(
    session: Session,
    query: Any,
    parameters: Mapping[str, Any] | None = None,
    *,
    driver: bool = False,
    blobs: bool = False,
) -> Iterator[Any]:
    """The driver's own rows of a Core ``select`` (every column's type in ``RAW_TYPES``) as a
    stream: one statement, its rows fetched ``STREAMED_ROWS`` at a time (``blobs``, rows each
    holding bytes of a document or a chunk: ``STREAMED_BLOBS``; a server-side cursor on
    PostgreSQL), so that a read of every job's rows holds a chunk of them, not all; an
    ExactFloat's NaN as the float (as ``plain_rows``), or with ``driver`` as the driver gave
    it (as ``driver_rows``). The session is flushed first."""
    columns = [] if driver else query.selected_columns
    exact = [i for i, c in enumerate(columns) if isinstance(c.type, ExactFloat)]
    session.flush()
    options = {"stream_results": True, BINARY_ROWS: True}
    result = session.connection().execute(query, parameters, execution_options=options)
    # the driver's rows as the result fetches them, before SQLAlchemy makes each a Row (its
    # strategy asked each time: the last rows come with the cursor closed, and another strategy)
    at_once = STREAMED_BLOBS if blobs else STREAMED_ROWS
    while rows := result.cursor_strategy.fetchmany(result, result.cursor, at_once):
        for row in rows:
            yield _exact_floats(row, exact) if exact else row


def job_groups(rows: Iterable[Any], position: int) -> Iterator[tuple[int, list[Any]]]:
    """Rows in job id order (the job's id at ``position``), a job's at a time."""
    for job_id, own in groupby(rows, key=itemgetter(position)):
        yield job_id, list(own)


def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter, none when there are no items),
    each taken as it comes: what a stream holds at once is one list."""
    remaining = iter(items)
    while batch := list(islice(remaining, size)):
        yield batch


class JobStream(Generic[T]):
    """What a stream holds of each job, in job id order, taken a job at a time in that order
    (a job passed over is skipped); a job's is fetched when asked for, not before."""

    def __init__(self, stream: Iterable[tuple[int, T]]) -> None:
        self._stream = iter(stream)
        self._ahead: tuple[int, T] | None = None  # fetched, of a job not yet asked for
        self._ended = False

    def take(self, job_id: int) -> T | None:
        """What the stream holds of ``job_id`` (None: nothing)."""
        while not self._ended:
            if self._ahead is None:
                self._ahead = next(self._stream, None)
                self._ended = self._ahead is None
            elif self._ahead[0] < job_id:
                self._ahead = None
            elif self._ahead[0] > job_id:
                return None
            else:
                found, self._ahead = self._ahead[1], None
                return found
        return None


def _exact_floats(row: Any, positions: list[int]) -> tuple[Any, ...]:
    for i in positions:
        if row[i].__class__ is str:
            break
    else:  # no text NaN: the driver's own row (a tuple), not a copy
        return row  # type: ignore[no-any-return]
    values = list(row)
    for i in positions:
        values[i] = exact_float(values[i])
    return tuple(values)


def exact_float(value: Any) -> Any:
    """An ExactFloat column's value as the driver gave it, SQLite's text 'NaN' as the float."""
    return float(value) if value.__class__ is str else value


def driver_rows(
    session: Session, query: Any, parameters: Mapping[str, Any] | None = None
) -> Sequence[Any]:
    """The driver's own rows of a Core ``select`` (every column's type in ``RAW_TYPES``; an
    ExactFloat's NaN is SQLite's text 'NaN'), the session flushed first."""
    session.flush()
    options = {BINARY_ROWS: True}
    result = session.connection().execute(query, parameters, execution_options=options)
    return result.cursor.fetchall()  # type: ignore[no-any-return]


class IntactRows:
    """What this process found intact, as Python's hash of the rows read with their checksum:
    rows read alike again are intact without their checksum made anew (hashing the tuple
    costs a fraction of making it), and a hash holds no row in memory; emptied past ``most``."""

    def __init__(self, most: int) -> None:
        self._hashes: set[int] = set()
        self._most = most

    def __contains__(self, read: int) -> bool:
        return read in self._hashes

    def add(self, read: int) -> None:
        if len(self._hashes) >= self._most:
            self._hashes.clear()
        self._hashes.add(read)


def table_of(model: type[Base]) -> Table:
    """A model's table, to insert many rows into it rather than through the ORM's bulk insert:
    the same statement (NULLs written as given), without the ORM's Python work per row."""
    return cast(Table, model.__table__)
