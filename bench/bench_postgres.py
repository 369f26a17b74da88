"""PostgreSQL ingest throughput against a plain psycopg COPY of the same rows, in one run,
then 8 processes ingesting 8 jobs at once on PostgreSQL and on SQLite.

    python bench/bench_postgres.py [--url postgresql+psycopg://postgres@127.0.0.1:5432/test]
                                   [--steps 250000] [--repeat 3] [--concurrent-steps 50000]

Every measurement gets a fresh schema (PostgreSQL) or file (SQLite), built by the migrations.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import psycopg
from sqlalchemy import create_engine, make_url, text

from bench.bench_ingest import raw_rows
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.schema import open_database
from tracker.store.transactions import write_session


class Schemas:
    """Fresh PostgreSQL schemas, dropped at the end."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.admin = create_engine(server, isolation_level="AUTOCOMMIT")
        self.made: list[str] = []

    def fresh(self) -> str:
        name = f"bench_{uuid.uuid4().hex[:12]}"
        with self.admin.connect() as connection:
            connection.execute(text(f'CREATE SCHEMA "{name}"'))
        self.made.append(name)
        url = f"{self.server}?options={quote(f'-csearch_path={name}')}"
        open_database(url).dispose()
        return url

    def drop_all(self) -> None:
        with self.admin.connect() as connection:
            for name in self.made:
                connection.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
        self.admin.dispose()


def time_tracker(url: str, job: Path) -> tuple[float, int]:
    engine = open_database(url)
    start = time.perf_counter()
    with write_session(engine) as session, session.begin():
        points = ingest_job(session, job).points
    elapsed = time.perf_counter() - start
    engine.dispose()
    return elapsed, points


def time_raw_copy(url: str, rows: list[tuple[int, int, float]]) -> float:
    parsed = make_url(url)
    options = parsed.query.get("options")
    conninfo = parsed.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
    with psycopg.connect(conninfo, options=str(options)) as connection:
        # shaped as points were stored until revision 0006 (the tracker now stores chunks)
        connection.execute(
            "CREATE TABLE point (curve_id integer, step bigint, value double precision, "
            "PRIMARY KEY (curve_id, step))"
        )
        connection.commit()
        start = time.perf_counter()
        with (
            connection.cursor() as cursor,
            cursor.copy("COPY point (curve_id, step, value) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        connection.commit()
        return time.perf_counter() - start


def concurrent_rate(urls: list[str], jobs: list[Path]) -> tuple[float, int]:
    """8 processes, each ingesting its own job into the same database."""
    start = time.perf_counter()
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tracker", "--db", urls[0], "ingest", str(job)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for job in jobs
    ]
    points = 0
    for process in processes:
        out, err = process.communicate()
        assert process.returncode == 0, err
        points += int(out.split(" arms, ")[1].split()[0])
    return time.perf_counter() - start, points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--steps", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrent-steps", type=int, default=50_000)
    args = parser.parse_args()
    schemas = Schemas(args.url)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            job = write_sample_job(work / "bigjob", steps=args.steps)
            rows = raw_rows(job)
            tracker = [time_tracker(schemas.fresh(), job) for _ in range(args.repeat)]
            raw = [time_raw_copy(schemas.fresh(), rows) for _ in range(args.repeat)]
            points = tracker[0][1]
            assert points == len(rows)
            best, raw_best = min(t for t, _ in tracker), min(raw)
            print(f"job: 4 arms x {args.steps:,} steps = {points:,} points (3 metrics per arm)")
            print(f"tracker ingest (PostgreSQL): {best:.2f} s  {points / best:,.0f} points/s")
            print(
                f"raw psycopg COPY          : {raw_best:.2f} s  {points / raw_best:,.0f} points/s"
            )
            print(f"ratio tracker/raw rate: {raw_best / best:.2f} (target >= 0.6)")
            jobs = [
                write_sample_job(work / f"c{i}", seed=i, steps=args.concurrent_steps)
                for i in range(8)
            ]
            for backend, url in (
                ("PostgreSQL", schemas.fresh()),
                ("SQLite", f"sqlite:///{work / 'concurrent.db'}"),
            ):
                open_database(url).dispose()
                elapsed, total = concurrent_rate([url], jobs)
                print(
                    f"8 processes x 1 job ({args.concurrent_steps:,} steps) on {backend}: "
                    f"{elapsed:.1f} s, {total / elapsed:,.0f} points/s in total"
                )
    finally:
        schemas.drop_all()


if __name__ == "__main__":
    main()
