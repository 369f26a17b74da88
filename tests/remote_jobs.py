"""What the remote tests share: job directories put behind a URL, and a job's stored rows
without the ids and the provenance that differ between two ingests of the same files."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import zstandard
from sqlalchemy import Engine, text

# each query selects one job's rows (:name); the columns that differ by ingest are dropped
JOB_ROWS = {
    "job": "SELECT content_digest FROM job WHERE name = :name",
    "source_file": "SELECT f.path, f.sha256, f.size FROM source_file f "
    "JOIN job j ON j.id = f.job_id WHERE j.name = :name",
    "probe": "SELECT p.* FROM probe p JOIN job j ON j.id = p.job_id WHERE j.name = :name",
    "run": "SELECT r.* FROM run r JOIN job j ON j.id = r.job_id WHERE j.name = :name",
    "curve": "SELECT r.arm, c.* FROM curve c JOIN run r ON r.id = c.run_id "
    "JOIN job j ON j.id = r.job_id WHERE j.name = :name",
    "curve_chunk": "SELECT r.arm, c.metric, k.* FROM curve_chunk k "
    "JOIN curve c ON c.id = k.curve_id JOIN run r ON r.id = c.run_id "
    "JOIN job j ON j.id = r.job_id WHERE j.name = :name",
    # the verdicts but their keys' ids (each database's own; the checksum covers the keys)
    "job_verdicts": "SELECT v.count, v.measured, v.tolerance, v.absent, v.figure_ends, v.figures "
    "FROM job_verdicts v JOIN job j ON j.id = v.job_id WHERE j.name = :name",
    "job_number": "SELECT n.* FROM job_number n JOIN job j ON j.id = n.job_id WHERE j.name = :name",
    "job_summary": "SELECT s.* FROM job_summary s JOIN job j ON j.id = s.job_id "
    "WHERE j.name = :name",
}
# a chunk's checksum is seeded by its curve's id and place, the kept rows' by their job: they
# differ between two ingests as the ids and names do
IDS = {"id", "job_id", "run_id", "curve_id", "checksum", "rows_checksum"}


def job_rows(engine: Engine, name: str) -> dict[str, list[tuple[str, ...]]]:
    """Every row of one job, ids left out, values as text (NaN compares equal so)."""
    rows: dict[str, list[tuple[str, ...]]] = {}
    with engine.connect() as connection:
        for table, query in JOB_ROWS.items():
            result = connection.execute(text(query), {"name": name}).mappings()
            rows[table] = sorted(
                tuple(repr(readable(table, v)) for key, v in row.items() if key not in IDS)
                for row in result
            )
    rows["job_summary"] = [
        tuple(value.replace(name, "<job>") for value in row) for row in rows["job_summary"]
    ]
    return rows


def put_in_memory(directory: Path) -> str:
    """``directory``'s files in fsspec's memory filesystem; its URL (a root of its own)."""
    import fsspec

    url = f"memory://t{uuid.uuid4().hex[:12]}/{directory.name}"
    fsspec.filesystem("memory").put(str(directory), url, recursive=True)
    return url


def stored_text(engine: Engine) -> str:
    """Every value of every tracker table, as one text to search."""
    tables = ("job", "job_meta", "source_file", "probe", "run", "curve", "job_summary")
    parts: list[Any] = []
    with engine.connect() as connection:
        for table in tables:
            for row in connection.execute(text(f"SELECT * FROM {table}")):
                parts.append(tuple(readable(table, value) for value in row))
    return repr(parts)


SUMMARY_HEADER = 9  # a kept summary's format byte and its 8-byte checksum


def readable(table: str, value: Any) -> Any:
    """A stored summary (compressed bytes) as its JSON text; any other value as it is."""
    if table == "job_summary" and isinstance(value, bytes | memoryview):
        frame = bytes(value)[SUMMARY_HEADER:]  # the format byte, then the checksum
        return zstandard.ZstdDecompressor().decompress(frame).decode("utf-8")
    return value
