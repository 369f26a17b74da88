"""Query results as polars frames, typed from the selected columns' SQLAlchemy types."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import BigInteger, Boolean, Float, Integer, String, Text
from sqlalchemy.orm import Session

from tracker.models import ExactFloat, JSONDocument

if TYPE_CHECKING:
    import polars as pl


def _dtype(sql_type: Any) -> Any:
    import polars as pl

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


def query_frame(session: Session, query: Any) -> pl.DataFrame:
    """Run a Core ``select`` and return its rows as a frame, one column per selected column."""
    import polars as pl

    schema = {column.name: _dtype(column.type) for column in query.selected_columns}
    # on the session's connection: plain rows, without the ORM's loading (several times
    # slower for thousands of rows); the session is flushed first, as its execute would
    session.flush()
    rows = session.connection().execute(query).all()
    # column by column: built from rows, polars looks into object values (a JSON document
    # holding an integer beyond 64 bits overflows)
    columns = zip(*rows, strict=True) if rows else ([] for _ in schema)
    return pl.DataFrame(
        [
            pl.Series(name, list(values), dtype=dtype)
            for (name, dtype), values in zip(schema.items(), columns, strict=True)
        ]
    )
