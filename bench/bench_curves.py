"""Curves as compressed chunks (issue 23): codecs, bytes on disk, ingest, reads, zoom.

    python bench/bench_curves.py [--steps 250000] [--base COMMIT] [--parts codecs,disk,...]

Each figure is measured against a baseline in the same run:

(The codecs the chunks could use are compared by ``bench/bench_codecs.py``.)

1. disk: bytes per point of the generator's 4 arms x STEPS x 3 metrics job after VACUUM,
   SQLite file against the same job in the tracker of BASE (its ``point`` table); the same
   job with every value written with 4 decimals; PostgreSQL: ``pg_total_relation_size`` of
   the curve tables (TRACKER_TEST_POSTGRES_URL, if set);
2. ingest: whole-process ``tracker ingest`` of that job, this tracker against BASE (the code
   of that commit, ``git archive`` into a temporary folder, run by this interpreter with it
   first on ``sys.path``), best of 2 each, with each process's peak RSS (VmHWM);
3. read: ``api.curve`` of a whole 1,000,000-step curve, this tracker against BASE, best of 3;
4. zoom: a real ``tracker serve`` process on a curve of 10,000,000 steps: p50/p95 of 200
   ``/api/curve`` requests for random 2,000-step windows (every raw point), against the same
   requests on a 100,000-step curve in the same server.

BASE defaults to ``ROW_STORE``, the last commit that stored a row per point.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import polars as pl
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from bench.bench_serve import Server, percentile
from tracker.models import Curve, Job, Run
from tracker.sample import write_sample_job
from tracker.store.curves import find_curve, load_curves
from tracker.store.job_rows import curve_summary
from tracker.store.points import write_points
from tracker.store.schema import open_database
from tracker.store.transactions import write_session
from tracker.summary.downsample import minmax_indices

REPO = Path(__file__).resolve().parent.parent
POSTGRES_ENV = "TRACKER_TEST_POSTGRES_URL"
PARTS = ("disk", "ingest", "read", "zoom")
ROW_STORE = "94aaf18f577f19e7ac4b08f49711088d7b66d612"  # the last commit of the point table
READ_STEPS = 1_000_000
ZOOM_STEPS = 10_000_000
ZOOM_BASELINE_STEPS = 100_000
WINDOW = 2_000

CHILD = """
import sys, time
from tracker.cli import main
sys.argv = ["tracker", *sys.argv[1:]]
start = time.perf_counter()
try:
    main()
except SystemExit as done:
    assert not done.code, done.code
elapsed = time.perf_counter() - start
status = open("/proc/self/status").read()
rss = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))
print(elapsed, rss)
"""

READ_CHILD = """
import sys, time
from tracker import api
times = []
for _ in range(3):
    start = time.perf_counter()
    api.curve(sys.argv[1], "ref_s0")
    times.append(time.perf_counter() - start)
print(min(times))
"""


# -- 1.-3. the job, this tracker and BASE ----------------------------------------------------


def base_checkout(commit: str, work: Path) -> Path:
    target = work / "base"
    target.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def run_child(code: str, args: list[str], base: Path | None) -> list[str]:
    env = dict(os.environ)
    if base is not None:  # BASE's package first on the path, ahead of this checkout's
        env["PYTHONPATH"] = str(base)
    done = subprocess.run(  # in BASE's folder: `python -c` puts the working folder first
        [sys.executable, "-c", code, *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=base,
    )
    return done.stdout.splitlines()[-1].split()  # the child's own line, after the command's


def ingest(job: Path, database: Path, base: Path | None) -> tuple[float, float]:
    """Seconds and peak MB of one ``tracker ingest`` process into a new SQLite file."""
    database.unlink(missing_ok=True)
    seconds, rss = run_child(CHILD, ["--db", f"sqlite:///{database}", "ingest", str(job)], base)
    return float(seconds), int(rss) / 1024


def vacuumed_size(database: Path) -> int:
    with sqlite3.connect(database) as connection:
        connection.execute("VACUUM")
    return database.stat().st_size


def empty_size(work: Path, base: Path | None) -> int:
    """The file size of a migrated database without a job: subtracted from the figures."""
    path = work / "empty.db"
    path.unlink(missing_ok=True)
    run_child(CHILD, ["--db", f"sqlite:///{path}", "db", "upgrade"], base)
    return vacuumed_size(path)


def four_decimals(job: Path, target: Path) -> Path:
    """The job with every metric written with 4 decimals, as training logs often print them."""
    target.mkdir()
    for path in job.iterdir():
        if path.suffix == ".csv":
            frame = pl.read_csv(path)
            frame.with_columns(pl.exclude("step").round(4)).write_csv(target / path.name)
        else:
            (target / path.name).write_bytes(path.read_bytes())
    return target


def postgres_bytes(job: Path) -> tuple[int, int] | None:
    """(bytes of curve and curve_chunk, points) after ingesting ``job`` into a new schema."""
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        return None
    schema = "bench_curves"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = f"{server}{'&' if '?' in server else '?'}options=-csearch_path%3D{schema}"
    run_child(CHILD, ["--db", url, "ingest", str(job)], None)
    with admin.connect() as connection:
        connection.execute(text(f'VACUUM ANALYZE "{schema}".curve_chunk'))
        size = connection.execute(
            text(
                f"SELECT pg_total_relation_size('\"{schema}\".curve_chunk') "
                f"+ pg_total_relation_size('\"{schema}\".curve')"
            )
        ).scalar_one()
        points = connection.execute(text(f'SELECT sum(n_points) FROM "{schema}".curve')).scalar()
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()
    return int(size), int(points)


def bench_job(steps: int, base: Path, work: Path, parts: set[str]) -> None:
    job = write_sample_job(work / "bigjob", steps=steps)
    points = 4 * 3 * steps
    runs: dict[str, list[tuple[float, float]]] = {"this": [], "base": []}
    for _ in range(2 if "ingest" in parts else 1):
        for side, checkout in (("base", base), ("this", None)):
            runs[side].append(ingest(job, work / f"{side}.db", checkout))
    print(f"\n## the job: 4 arms x {steps:,} steps x 3 metrics = {points:,} points")
    if "disk" in parts:
        for side, checkout in (("base", base), ("this", None)):
            size = vacuumed_size(work / f"{side}.db") - empty_size(work, checkout)
            print(f"  disk, {side:4}: {size / points:6.2f} bytes/point (SQLite, after VACUUM)")
        rounded = four_decimals(job, work / "job4dec")
        for side, checkout in (("base", base), ("this", None)):
            ingest(rounded, work / f"{side}4.db", checkout)
            size = vacuumed_size(work / f"{side}4.db") - empty_size(work, checkout)
            print(f"  disk, {side:4}, 4 decimals: {size / points:6.2f} bytes/point")
        for label, directory in (("generator's", job), ("4 decimals", rounded)):
            measured = postgres_bytes(directory)
            if measured is not None:
                size, stored = measured
                print(f"  PostgreSQL, {label}: {size / stored:6.2f} bytes/point (curve tables)")
    if "ingest" in parts:
        best = {side: min(t for t, _ in runs[side]) for side in runs}
        rss = {side: max(r for _, r in runs[side]) for side in runs}
        print(f"  ingest, base: {best['base']:6.2f} s, peak RSS {rss['base']:5.0f} MB")
        print(f"  ingest, this: {best['this']:6.2f} s, peak RSS {rss['this']:5.0f} MB")
        print(f"  ingest speed-up: {best['base'] / best['this']:.2f}x (target >= 2)")


def bench_read(base: Path, work: Path) -> None:
    job = write_sample_job(
        work / "long", steps=READ_STEPS, arms=("ref_s0",), probes=False, failed_probe=None
    )
    seconds = {}
    for side, checkout in (("base", base), ("this", None)):
        database = work / f"read-{side}.db"
        ingest(job, database, checkout)
        seconds[side] = float(run_child(READ_CHILD, [f"sqlite:///{database}"], checkout)[0])
    print(f"\n## api.curve of a whole {READ_STEPS:,}-step curve (SQLite, best of 3)")
    print(f"  base: {seconds['base'] * 1000:7.1f} ms   this: {seconds['this'] * 1000:7.1f} ms")
    print(f"  speed-up: {seconds['base'] / seconds['this']:.1f}x (target >= 10)")


# -- 5. zoom -----------------------------------------------------------------------------------


def long_curve_database(path: Path) -> str:
    """Two jobs of one curve each, of ZOOM_STEPS and ZOOM_BASELINE_STEPS steps, written
    through the tracker's own writer (an ingest of a 10M-line CSV would take minutes)."""
    url = f"sqlite:///{path}"
    engine = open_database(url)
    rng = np.random.default_rng(0)
    for name, steps in (("long", ZOOM_STEPS), ("short", ZOOM_BASELINE_STEPS)):
        step = np.arange(steps, dtype=np.int64)
        curve = pl.DataFrame(
            {"step": step, "value": 2 + np.exp(-step / 1e6) + rng.normal(0, 0.05, steps)}
        )
        with write_session(engine) as session, session.begin():
            job = Job(
                name=name, source_path="/", content_digest=name, ingested_at=datetime.now(UTC)
            )
            session.add(job)
            session.flush()
            run = Run(
                job_id=job.id, arm="ref_s0", model="gpt-124m", variant="ref", seed=0, extra={}
            )
            session.add(run)
            session.flush()
            row = Curve(run_id=run.id, **curve_summary("loss", curve))
            session.add(row)
            session.flush()
            write_points(session.connection(), (row.id, name, run.arm, "loss"), curve)
    engine.dispose()
    return url


def library_zoom(url: str, rng: random.Random) -> list[float]:
    """Milliseconds of reading and downsampling 200 windows of the long curve in this
    process: what a zoom costs without the server's HTTP and JSON."""
    engine = open_database(url)
    latencies = []
    with Session(engine) as session:
        curve = find_curve(session, "long", "ref_s0")
        for _ in range(200):
            start = rng.randrange(ZOOM_STEPS - WINDOW)
            began = time.perf_counter()
            frame = load_curves(session, [curve.id], (start, start + WINDOW - 1))
            minmax_indices(frame["value"].to_numpy(), WINDOW)
            latencies.append((time.perf_counter() - began) * 1000)
            assert frame.height == WINDOW
    engine.dispose()
    return latencies


def bench_zoom(work: Path) -> None:
    url = long_curve_database(work / "zoom.db")
    rng = random.Random(0)
    in_process = library_zoom(url, rng)
    server = Server(url)
    latencies: dict[str, list[float]] = {"long": [], "short": []}
    try:
        with httpx.Client(base_url=server.base, timeout=60) as client:
            for _ in range(200):
                for name, steps in (("long", ZOOM_STEPS), ("short", ZOOM_BASELINE_STEPS)):
                    start = rng.randrange(steps - WINDOW)
                    path = (
                        f"/api/curve?job={name}&arm=ref_s0&start={start}&end={start + WINDOW - 1}"
                    )
                    began = time.perf_counter()
                    answer = client.get(path)
                    latencies[name].append((time.perf_counter() - began) * 1000)
                    assert answer.status_code == 200 and answer.json()["raw"], answer.text
                    assert len(answer.json()["step"]) == WINDOW
    finally:
        server.stop()
    print(
        f"\n## zoom: /api/curve, random {WINDOW:,}-step windows, 200 each (SQLite, tracker serve)"
    )
    for name, steps in (("long", ZOOM_STEPS), ("short", ZOOM_BASELINE_STEPS)):
        p50, p95 = percentile(latencies[name], 0.5), percentile(latencies[name], 0.95)
        print(f"  {steps:>10,}-step curve: p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    p50, p95 = percentile(in_process, 0.5), percentile(in_process, 0.95)
    print(f"  in process (read + downsample, 10M): p50 {p50:6.1f} ms  p95 {p95:6.1f} ms")
    ratio = percentile(latencies["long"], 0.95) / percentile(latencies["short"], 0.95)
    print(f"  p95 ratio 10M / 100k: {ratio:.2f} (target: p95 <= 20 ms at 10M)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=250_000)
    parser.add_argument("--base", default=None, help="commit to compare with")
    parser.add_argument("--parts", default=",".join(PARTS))
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    commit = args.base or ROW_STORE
    print(f"base: {commit[:10]}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base = base_checkout(commit, work) if parts & {"disk", "ingest", "read"} else None
        if base is not None and parts & {"disk", "ingest"}:
            bench_job(args.steps, base, work, parts)
        if base is not None and "read" in parts:
            bench_read(base, work)
        if "zoom" in parts:
            bench_zoom(work)


if __name__ == "__main__":
    main()
