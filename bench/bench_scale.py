"""Growth with the number of jobs (issue 43): ingest, listings, claims, compare, the report and
the server's pages at growing database sizes, on SQLite and PostgreSQL.

    python bench/bench_scale.py [--sizes 100,300,1000] [--large] [--steps 2000]
                                [--backends sqlite,postgresql] [--keep FILE]

One database per backend grows through the sizes (``--large``: 3,000 and 10,000 too): at each,
the jobs missing are ingested (sample jobs of 4 arms x STEPS steps, each with its own seed and
time) and then every measured command runs in a fresh process of its own: its CPU seconds
(with those of the processes it waits for: the report renders half its jobs in a second one),
wall seconds, SQL statements (counted by a ``before_cursor_execute`` listener on every
engine) and peak RSS (``ru_maxrss``; a bare process that imported the tracker is the floor).
The server's pages are asked in one process, each the first visit of a new app (nothing
cached), its collector set as ``tracker serve`` sets it (``settle_for_serving``). On
PostgreSQL (TRACKER_TEST_POSTGRES_URL, a schema of its own), two ``tracker serve`` processes
on the database then answer the same pages with the same bytes.
``--keep FILE``: the SQLite database grows in FILE, kept for the next run (which measures the
sizes from the jobs it holds on, after ``tracker db rederive`` brings their kept rows up to
the analysis code of the day).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
from sqlalchemy import create_engine, inspect, text

from bench.bench_serve import Server
from tracker.sample import write_sample_job

POSTGRES_ENV = "TRACKER_TEST_POSTGRES_URL"
SIZES = (100, 300, 1000)
LARGE = (3000, 10_000)
PAGES = ("/", "/runs", "/claims", "/api/runs")
INGEST_BLOCK = 100  # sample jobs written and ingested at once
CHILD = r"""
import json, resource, sys, time
from sqlalchemy import Engine, event
counted = [0]
event.listen(Engine, "before_cursor_execute", lambda *a: counted.__setitem__(0, counted[0] + 1))
url, what, args = sys.argv[1], sys.argv[2], sys.argv[3:]
def spent():  # this process's CPU and its children's waited for (the report's worker)
    used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in used)
def measured(work):
    statements, cpu, wall = counted[0], spent(), time.perf_counter()
    work()
    return {"cpu": spent() - cpu, "wall": time.perf_counter() - wall,
            "statements": counted[0] - statements}
found = {}
if what == "cli":
    from typer.testing import CliRunner
    from tracker.cli import app
    def run():
        result = CliRunner().invoke(app, ["--db", url, *args], catch_exceptions=False)
        assert result.exit_code in (0, 3), result.output
    found[" ".join(args)] = measured(run)
else:
    from fastapi.testclient import TestClient
    from tracker.server.app import create_app
    from tracker.server.listen import settle_for_serving
    for page in args:
        app = create_app(url, None, None)
        settle_for_serving()  # as tracker serve does before its first request
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            def get():
                assert client.get(page).status_code == 200
            found[page] = measured(get)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({name: {**row, "peak_mb": peak} for name, row in found.items()}))
"""


def child(url: str, what: str, *args: str) -> dict[str, dict[str, float]]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, what, *args], capture_output=True, text=True
    )
    if done.returncode:
        sys.exit(f"{what} {' '.join(args)[:200]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def ingest(url: str, work: Path, steps: int, first: int, last: int) -> dict[str, float]:
    """Ingest sample jobs ``first`` to ``last - 1`` (written a block at a time, each block in
    one process, then deleted: 10,000 jobs' folders would fill gigabytes): CPU and wall
    seconds a job."""
    cpu = wall = 0.0
    for start in range(first, last, INGEST_BLOCK):
        numbers = range(start, min(start + INGEST_BLOCK, last))
        folders = [
            write_sample_job(work / "jobs" / f"job{n:05d}", steps=steps, seed=n) for n in numbers
        ]
        row = next(iter(child(url, "cli", "ingest", *map(str, folders)).values()))
        cpu, wall = cpu + row["cpu"], wall + row["wall"]
        shutil.rmtree(work / "jobs")
    jobs = max(last - first, 1)
    return {"cpu": cpu / jobs, "wall": wall / jobs}


def stored_jobs(url: str) -> int:
    """How many jobs the database holds already (none in a new one)."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("job"):
                return 0
            return int(connection.execute(text("SELECT count(*) FROM job")).scalar_one())
    finally:
        engine.dispose()


def measure(url: str, backend: str, report: Path, size: int) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for args in (("jobs",), ("query", "runs"), ("claims",)):
        found[" ".join(args)] = next(iter(child(url, "cli", *args).values()))
    compare = child(url, "cli", "compare", f"job{size - 2:05d}", f"job{size - 1:05d}")
    found["compare"] = next(iter(compare.values()))
    out = str(report / f"report-{backend}-{size}")
    for label in ("report (cold)", "report (incremental)"):
        found[label] = next(iter(child(url, "cli", "report", "--out", out).values()))
    found.update({f"page {p}": row for p, row in child(url, "pages", *PAGES).items()})
    return found


def two_servers(url: str) -> str:
    """Whether two ``tracker serve`` processes on the database answer the same bytes."""
    servers = [Server(url), Server(url)]
    try:
        same = []
        for page in (*PAGES, "/api/jobs", "/api/claims"):
            bodies = [httpx.get(s.base + page, timeout=600).content for s in servers]
            same.append(bodies[0] == bodies[1])
        return f"two servers on one PostgreSQL database: {sum(same)}/{len(same)} pages identical"
    finally:
        for server in servers:
            server.stop()


def postgres_url() -> tuple[str, str] | None:
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        return None
    schema = f"bench_scale_{uuid.uuid4().hex[:8]}"
    with create_engine(server).begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    return f"{server}?options=-csearch_path%3D{schema}", schema


def drop_schema(schema: str) -> None:
    with create_engine(os.environ[POSTGRES_ENV]).begin() as connection:
        connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))


def table(results: dict[str, dict[int, dict[str, dict[str, float]]]], sizes: list[int]) -> None:
    for backend, by_size in results.items():
        print(f"\n### {backend}\n")
        head = " | ".join(f"{n:,} jobs" for n in sizes)
        print(f"| what | {head} | growth {sizes[0]:,} -> {sizes[-1]:,} |")
        print("|---|" + "---|" * (len(sizes) + 1))
        names = dict.fromkeys(name for n in sizes for name in by_size[n])
        for name in names:
            cells = []
            for n in sizes:
                row = by_size[n].get(name)
                cell = "—" if row is None else f"{row['cpu']:.2f} s CPU, {row['wall']:.2f} s"
                if row is not None and "statements" in row:
                    cell += f", {row['statements']:.0f} st, {row['peak_mb']:.0f} MB"
                cells.append(cell)
            first, last = by_size[sizes[0]].get(name), by_size[sizes[-1]].get(name)
            growth = "—"
            if first and last and first["cpu"]:
                growth = f"x{last['cpu'] / first['cpu']:.1f}"
            print(f"| {name} | {' | '.join(cells)} | CPU {growth} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--large", action="store_true", help="3,000 and 10,000 jobs too")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument(
        "--keep", type=Path, help="grow the SQLite database in this file, kept between runs"
    )
    args = parser.parse_args()
    sizes = sorted({int(n) for n in args.sizes.split(",")} | (set(LARGE) if args.large else set()))
    results: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as scratch:
        work = Path(scratch)
        for backend in args.backends.split(","):
            schema = None
            if backend == "sqlite":
                url = f"sqlite:///{args.keep or work / 'scale.db'}"
            else:
                made = postgres_url()
                if made is None:
                    print(f"{POSTGRES_ENV} not set: PostgreSQL left out", file=sys.stderr)
                    continue
                url, schema = made
            try:
                stored = stored_jobs(url)
                if stored:
                    child(url, "cli", "db", "rederive")
                results[backend] = {}
                for size in sizes:
                    if size < stored:
                        print(f"{backend} {size}: the database holds {stored}", file=sys.stderr)
                        continue
                    started = time.perf_counter()
                    row = ingest(url, work, args.steps, stored, size)
                    # a file kept from an earlier run may hold every job already: none ingested
                    found = {"ingest (a job)": row} if size > stored else {}
                    stored = size
                    found |= measure(url, backend, work, size)
                    results[backend][size] = found
                    took = time.perf_counter() - started
                    # each size's figures as they come: 10,000 jobs take hours
                    print(f"{backend} {size}: {took:.0f} s {json.dumps(found)}", file=sys.stderr)
                table(
                    {backend: results[backend]}, sorted(results[backend])
                )  # as soon as it is known
                if schema is not None:
                    print(two_servers(url))
            finally:
                if schema is not None:
                    drop_schema(schema)
    return 0


if __name__ == "__main__":
    sys.exit(main())
