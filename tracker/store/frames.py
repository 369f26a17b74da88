"""Query results as polars frames, typed from the selected columns' SQLAlchemy types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl
from sqlalchemy import BigInteger, Boolean, Float, Integer, String, Text
from sqlalchemy.orm import Session

from tracker.models import ExactFloat, JSONDocument
from tracker.store.raw_rows import RAW_TYPES, batches, plain_rows, streamed_rows


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


def query_frame(
    session: Session, query: Any, parameters: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """Run a Core ``select`` (with its bound ``parameters``) and return its rows as a frame,
    one column per selected column."""
    return rows_frame(query, plain_rows(session, query, parameters))


# rows made a frame at a time by ``streamed_frame``: the Python objects of this many rows are
# held at once (a few MB), not those of every row (250,000 probes of 10,000 jobs: 160 MB)
STREAMED_FRAME_ROWS = 20_000


def streamed_frame(
    session: Session, query: Any, parameters: Mapping[str, Any] | None = None
) -> pl.DataFrame:
    """``query_frame`` of a query of many rows, its rows streamed (``streamed_rows``) and made
    a frame ``STREAMED_FRAME_ROWS`` at a time; every selected column's type must be one the
    driver returns as its Python value (``RAW_TYPES``)."""
    assert all(isinstance(c.type, RAW_TYPES) for c in query.selected_columns)
    rows = streamed_rows(session, query, parameters)
    frames = [rows_frame(query, batch) for batch in batches(rows, STREAMED_FRAME_ROWS)]
    return pl.concat(frames) if frames else rows_frame(query, [])


def rows_frame(query: Any, rows: Sequence[Sequence[Any]]) -> pl.DataFrame:
    """Rows of a Core ``select``, its values as SQLAlchemy gives them, as ``query_frame``'s."""
    schema = {column.name: _dtype(column.type) for column in query.selected_columns}
    # column by column: built from rows, polars looks into object values (a JSON document
    # holding an integer beyond 64 bits overflows)
    columns = zip(*rows, strict=True) if rows else ([] for _ in schema)
    return pl.DataFrame(
        [
            pl.Series(name, list(values), dtype=dtype)
            for (name, dtype), values in zip(schema.items(), columns, strict=True)
        ]
    )
