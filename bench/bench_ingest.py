"""Ingest throughput against a raw sqlite3 executemany of the same rows, in one run.

    python bench/bench_ingest.py [--steps 250000] [--repeat 3]

Generates a job of 4 arms x STEPS steps (3 metrics per arm), then, best of REPEAT each:
- tracker: the library ingest (scan, hash, parse, validate, write) into a fresh migrated
  SQLite database, one transaction;
- raw: plain ``sqlite3`` ``executemany`` of the same (curve_id, step, value) rows into a
  table shaped as points were stored until revision 0006 (``raw_point``, WITHOUT ROWID) in a
  fresh migrated database, one transaction, rows prepared beforehand (the tracker now stores
  chunks: ``bench/bench_curves.py`` compares it with the tracker of before).
Then the peak RSS of ``python -m tracker ingest`` as a separate process.
"""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from tracker.jobdir.reader import parse_curve_csv
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.schema import open_database
from tracker.store.transactions import write_session

RAW_TABLE = (
    "CREATE TABLE raw_point (curve_id INTEGER, step BIGINT, value FLOAT, "
    "PRIMARY KEY (curve_id, step)) WITHOUT ROWID"
)


def fresh_database(directory: Path, name: str) -> str:
    url = f"sqlite:///{directory / name}"
    open_database(url).dispose()
    return url


def time_tracker(job: Path, work: Path, run: int) -> tuple[float, int]:
    engine = open_database(fresh_database(work, f"tracker{run}.db"))
    start = time.perf_counter()
    with write_session(engine) as session, session.begin():
        result = ingest_job(session, job)
    elapsed = time.perf_counter() - start
    engine.dispose()
    return elapsed, result.points


def raw_rows(job: Path) -> list[tuple[int, int, float]]:
    rows: list[tuple[int, int, float]] = []
    curve_id = 0
    for csv_path in sorted(job.glob("*.csv")):
        curves = parse_curve_csv(csv_path.name, csv_path.read_bytes())
        for metric in curves.columns[1:]:
            curve_id += 1
            part = curves.select("step", pl.col(metric)).drop_nulls()
            rows += zip(
                [curve_id] * part.height,
                part["step"].to_list(),
                part[metric].to_list(),
                strict=True,
            )
    return rows


def time_raw(rows: list[tuple[int, int, float]], work: Path, run: int) -> float:
    path = work / f"raw{run}.db"
    fresh_database(work, path.name)
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute(RAW_TABLE)
    start = time.perf_counter()
    connection.execute("BEGIN")
    connection.executemany("INSERT INTO raw_point (curve_id, step, value) VALUES (?, ?, ?)", rows)
    connection.execute("COMMIT")
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed


MEASURE_CHILD = """
import sys
from tracker.cli import main
sys.argv = ["tracker", *sys.argv[1:]]
try:
    main()
except SystemExit as done:
    assert not done.code, done.code
status = open("/proc/self/status").read()
print(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))
"""


def peak_rss_mb(job: Path, work: Path) -> float:
    """Peak RSS of a separate ``tracker ingest`` process, from its own VmHWM (a forked child's
    rusage would count the parent's pages from before its exec)."""
    url = fresh_database(work, "rss.db")
    done = subprocess.run(
        [sys.executable, "-c", MEASURE_CHILD, "--db", url, "ingest", str(job)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout.splitlines()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        job = write_sample_job(work / "bigjob", steps=args.steps)
        rows = raw_rows(job)
        tracker_runs = [time_tracker(job, work, run) for run in range(args.repeat)]
        raw_runs = [time_raw(rows, work, run) for run in range(args.repeat)]
        points = tracker_runs[0][1]
        assert points == len(rows), (points, len(rows))
        tracker_best = min(t for t, _ in tracker_runs)
        raw_best = min(raw_runs)
        rss = peak_rss_mb(job, work)
    print(f"job: 4 arms x {args.steps:,} steps = {points:,} points (3 metrics per arm)")
    print(f"tracker ingest : {tracker_best:.2f} s  {points / tracker_best:,.0f} points/s")
    print(f"raw executemany: {raw_best:.2f} s  {points / raw_best:,.0f} points/s")
    print(f"ratio tracker/raw rate: {raw_best / tracker_best:.2f} (target >= 0.6)")
    print(f"peak RSS of `tracker ingest` process: {rss:.0f} MB (target < 400 MB)")


if __name__ == "__main__":
    main()
