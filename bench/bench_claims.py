"""Claims over many jobs without re-reading their points: a warm library call against the
time it takes just to read every loss point the claims would otherwise need.

    python bench/bench_claims.py [--jobs 1000] [--steps 20000] [--repeat 3] [--db PATH]

The database is built once with the library, as real use builds it: each job is a sample
job directory (``tracker.sample``, four arms of STEPS steps, seeds varied, one job in
ten with a shifted flash state and ``flashoptim=0.1.5``) written to a scratch folder and
ingested by ``ingest_job``, which also stores the job's derived rows; the folder is then
removed. The file is kept (default under /tmp, outside git) and reused by later runs when it
holds the asked number of jobs. Then, in one warm process, best of REPEAT each:

* ``claims(session, JobSelection(), exp)``: every claim over every job (target < 3 s);
* the baseline: reading every loss point of every job (``load_curves``, a job at a time),
  the least any computation from points would cost.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tracker.analysis.expectations import load_expectations
from tracker.models import Curve, Job, Run
from tracker.queries.claims import claims
from tracker.queries.selection import JobSelection
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.curves import load_curves
from tracker.store.schema import open_database
from tracker.store.transactions import in_write_transaction

TARGET_S = 3.0
DEFAULT_DB = Path(tempfile.gettempdir()) / "bench-claims"


def build(url: str, jobs: int, steps: int) -> float:
    """Ingest the missing jobs j0000.. into ``url``; seconds spent."""
    engine = open_database(url)
    start = time.perf_counter()
    with Session(engine) as session:
        have = session.scalar(select(func.count()).select_from(Job)) or 0
    with tempfile.TemporaryDirectory(prefix="bench-claims-") as scratch:
        for seed in range(have, jobs):
            shifted = seed % 10 == 9
            directory = write_sample_job(
                Path(scratch) / f"j{seed:04d}",
                seed=seed,
                steps=steps,
                flash_state_shift=0.5 if shifted else 0.0,
                failed_probe=None,
            )
            meta = {"flashoptim": "0.1.5" if shifted else "0.1.0"}
            in_write_transaction(
                engine, lambda session, d=directory, m=meta: ingest_job(session, d, meta=m)
            )
            shutil.rmtree(directory)
            if (seed + 1) % 50 == 0:
                print(f"  {seed + 1} jobs ingested, {time.perf_counter() - start:.0f} s")
    engine.dispose()
    return time.perf_counter() - start


def best_of(engine: Any, work: Callable[[Session], Any], repeat: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        with Session(engine) as session:
            start = time.perf_counter()
            result = work(session)
            best = min(best, time.perf_counter() - start)
    return best, result


def read_all_loss_points(session: Session) -> int:
    """Every loss point, a job at a time (all 80 million at once would not fit in memory)."""
    rows = session.execute(
        select(Run.job_id, Curve.id).join(Run, Run.id == Curve.run_id).where(Curve.metric == "loss")
    ).all()
    by_job: dict[int, list[int]] = {}
    for job_id, curve_id in rows:
        by_job.setdefault(job_id, []).append(curve_id)
    return sum(load_curves(session, curve_ids).height for curve_ids in by_job.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--db", type=Path, default=None, help="database file to build/reuse")
    args = parser.parse_args()

    path = args.db or DEFAULT_DB / f"claims-{args.jobs}x{args.steps}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{path}"
    seconds = build(url, args.jobs, args.steps)
    print(f"database {path}: {args.jobs} jobs ({seconds:.0f} s to build this run)")

    engine = open_database(url)
    exp = load_expectations()
    selection = JobSelection()
    with Session(engine) as session:
        claims(session, selection, exp)  # warm: imports, statement caches, file cache
    claim_s, frame = best_of(engine, lambda s: claims(s, selection, exp), args.repeat)
    print(f"claims: best of {args.repeat} {claim_s:.2f} s", flush=True)
    points_s, points = best_of(engine, read_all_loss_points, 1)  # minutes: once
    engine.dispose()

    print(f"| claims over {args.jobs} jobs ({frame.height} rows) | {claim_s:.2f} s |")
    print(f"| reading their {points:,} loss points (baseline) | {points_s:.2f} s |")
    print(f"| **ratio** baseline / claims | **{points_s / claim_s:.1f}x** |")
    print(f"target < {TARGET_S:g} s: {'met' if claim_s < TARGET_S else 'MISSED'}")
    statuses = frame["status"].value_counts(sort=True)
    print("statuses:", ", ".join(f"{n} {s}" for s, n in statuses.iter_rows()))


if __name__ == "__main__":
    main()
