"""Query results as polars frames, typed from the selected columns' SQLAlchemy types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
from sqlalchemy import BigInteger, Boolean, Float, Integer, String, Text
from sqlalchemy.orm import Session

from tracker.models import ExactFloat, JSONDocument


def _dtype(sql_type: Any) -> Any:
    kinds: list[tuple[type, Any]] = [
        (JSONDocument, pl.Object),
        (ExactFloat, pl.Float64),
        (Boolean, pl.Boolean),
        (Integer, pl.Int64),
        (BigInteger, pl.Int64),
        (Float, pl.Float64),
        (String, pl.String),
        (Text, pl.String),
    ]
    return next((dtype for kind, dtype in kinds if isinstance(sql_type, kind)), None)


# column types whose values the drivers (sqlite3, psycopg) return as the Python values
RAW_TYPES = (Integer, BigInteger, String, Text, ExactFloat)


def plain_rows(
    session: Session, query: Any, parameters: Mapping[str, Any] | None = None
) -> Sequence[Any]:
    """Run a Core ``select`` on the session's connection (flushed first, as the session's own
    execute would) and return its rows without the ORM's loading. When every column's type
    is in ``RAW_TYPES`` the rows are the driver's own, with SQLite's text 'NaN' of an
    ExactFloat column read as a float: converting every value through SQLAlchemy costs more
    than the query for thousands of rows."""
    types = [column.type for column in query.selected_columns]
    session.flush()
    result = session.connection().execute(query, parameters)
    if not all(isinstance(t, RAW_TYPES) for t in types):
        return result.all()
    rows = result.cursor.fetchall()
    exact = [i for i, t in enumerate(types) if isinstance(t, ExactFloat)]
    return [_exact_floats(row, exact) for row in rows] if exact else rows


def _exact_floats(row: Any, positions: list[int]) -> tuple[Any, ...]:
    values = list(row)
    for i in positions:
        if values[i].__class__ is str:
            values[i] = float(values[i])
    return tuple(values)


def query_frame(
    session: Session, query: Any, parameters: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """Run a Core ``select`` (with its bound ``parameters``) and return its rows as a frame,
    one column per selected column."""
    schema = {column.name: _dtype(column.type) for column in query.selected_columns}
    rows = plain_rows(session, query, parameters)
    # column by column: built from rows, polars looks into object values (a JSON document
    # holding an integer beyond 64 bits overflows)
    columns = zip(*rows, strict=True) if rows else ([] for _ in schema)
    return pl.DataFrame(
        [
            pl.Series(name, list(values), dtype=dtype)
            for (name, dtype), values in zip(schema.items(), columns, strict=True)
        ]
    )
