"""The hot path: bulk-writing and reading curve points, per backend.

Points bypass the ORM: SQLite gets the driver's ``executemany`` fed by an iterator (no list of
a million tuples), PostgreSQL gets ``COPY``. NaN is written as NULL on both backends, so a
point's NULL always reads back as NaN.
"""

from __future__ import annotations

import io
from itertools import repeat
from typing import Any

import polars as pl
from sqlalchemy import Connection

from tracker.errors import DatabaseFailed
from tracker.store.db import first_line

INSERT_SQLITE = "INSERT INTO point (curve_id, step, value) VALUES (?, ?, ?)"
COPY_POSTGRES = "COPY point (curve_id, step, value) FROM STDIN"


def write_points(connection: Connection, curve_id: int, curve: pl.DataFrame) -> None:
    """Write a frame of ``step`` and ``value`` as the points of ``curve_id``."""
    if curve.height == 0:
        return
    dbapi = connection.connection.driver_connection
    assert dbapi is not None
    try:
        if connection.dialect.name == "postgresql":
            _copy_postgres(dbapi, curve_id, curve)
        else:
            _insert_sqlite(dbapi, curve_id, curve)
    except connection.dialect.loaded_dbapi.Error as exc:  # the driver's own, past SQLAlchemy
        raise DatabaseFailed(reason=first_line(exc)) from None


def _insert_sqlite(dbapi: Any, curve_id: int, curve: pl.DataFrame) -> None:
    rows = zip(repeat(curve_id), curve["step"].to_list(), curve["value"].to_list(), strict=False)
    dbapi.cursor().executemany(INSERT_SQLITE, rows)


def _copy_postgres(dbapi: Any, curve_id: int, curve: pl.DataFrame) -> None:
    text = io.BytesIO()
    curve.select(
        pl.lit(curve_id).alias("curve_id"), "step", pl.col("value").fill_nan(None)
    ).write_csv(text, include_header=False, separator="\t", null_value="\\N", float_precision=None)
    with dbapi.cursor() as cursor, cursor.copy(COPY_POSTGRES) as copy:
        copy.write(text.getbuffer())
