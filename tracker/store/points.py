"""The hot path: writing a curve's points as compressed chunks (``curve_chunk``), per backend.

A curve is cut into chunks of ``CHUNK_POINTS`` points, each encoded by ``tracker.store.codec``;
SQLite gets the driver's ``executemany``, PostgreSQL a binary ``COPY``. A million-point curve
is 62 rows, so the database does a few dozen row writes where it did a million. An ingest
writes the chunks of all of an arm's curves in one go: each ``COPY`` costs the client as much
CPU as a few dozen rows written inside one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import polars as pl
from sqlalchemy import Connection

from tracker.errors import DatabaseFailed
from tracker.store import codec
from tracker.store.engine import first_line

# A 2,000-step zoom touches one or two chunks; larger chunks barely compress better (6.18 vs
# 6.20 bytes/point at 4,096) and would decode more than a zoom shows.
CHUNK_POINTS = 16_384
COLUMNS = "curve_id, first_step, last_step, n_points, min_value, max_value, data, checksum"
INSERT_SQLITE = f"INSERT INTO curve_chunk ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
COPY_POSTGRES = f"COPY curve_chunk ({COLUMNS}) FROM STDIN (FORMAT BINARY)"
COPY_TYPES = ["int4", "int8", "int8", "int4", "float8", "float8", "bytea", "int8"]

# (first_step, last_step, n_points, min_value, max_value, data): a stored chunk, without its curve
ChunkRow = tuple[int, int, int, float | None, float | None, bytes]
# (curve id, job, arm, metric): what a curve's chunk checksums are seeded with
CurvePlace = tuple[int, str, str, str]
# the chunks of one curve, with its place
CurveChunks = tuple[CurvePlace, Sequence[ChunkRow]]


def chunk_rows(steps: np.ndarray, values: np.ndarray) -> Iterator[ChunkRow]:
    """The chunks of one curve (``steps`` increasing), encoded."""
    for start in range(0, len(steps), CHUNK_POINTS):
        part_steps = steps[start : start + CHUNK_POINTS]
        part_values = values[start : start + CHUNK_POINTS]
        finite = part_values[np.isfinite(part_values)]
        yield (
            int(part_steps[0]),
            int(part_steps[-1]),
            len(part_steps),
            float(finite.min()) if len(finite) else None,
            float(finite.max()) if len(finite) else None,
            codec.encode(part_steps, part_values),
        )


def points_chunks(points: pl.DataFrame) -> list[ChunkRow]:
    """The chunks of a frame of ``step`` and ``value``, encoded."""
    steps = points["step"].cast(pl.Int64).to_numpy()
    values = points["value"].cast(pl.Float64).to_numpy()
    return list(chunk_rows(steps, values))


def write_points(connection: Connection, curve: CurvePlace, points: pl.DataFrame) -> None:
    """Write a frame of ``step`` and ``value`` as the points of ``curve``."""
    write_chunks(connection, [(curve, points_chunks(points))])


def write_chunks(connection: Connection, curves: Sequence[CurveChunks]) -> None:
    """Store encoded chunks as those of their curves (an ingest's, or a copy's as read and
    checked), each with its checksum for its curve's id and place, in one statement."""
    stored = []
    for place, rows in curves:
        seed = codec.curve_seed(*place)
        stored += [_stored(place[0], seed, row) for row in rows]
    if not stored:
        return
    dbapi = connection.connection.driver_connection
    assert dbapi is not None
    try:
        if connection.dialect.name == "postgresql":
            _copy_postgres(dbapi, stored)
        else:
            dbapi.cursor().executemany(INSERT_SQLITE, stored)
    except connection.dialect.loaded_dbapi.Error as exc:  # the driver's own, past SQLAlchemy
        raise DatabaseFailed(reason=first_line(exc)) from None


def _copy_postgres(dbapi: Any, stored: Sequence[tuple[Any, ...]]) -> None:
    with dbapi.cursor() as cursor, cursor.copy(COPY_POSTGRES) as copy:
        copy.set_types(COPY_TYPES)
        for row in stored:
            copy.write_row(row)


def _stored(curve_id: int, seed: int, row: ChunkRow) -> tuple[Any, ...]:
    """A chunk's row as written: with its curve and its checksum (seeded by that curve)."""
    return (curve_id, *row, codec.checksum(row[5], seed))
