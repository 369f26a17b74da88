"""Summary queries must not scan curve points: probes, runs and trend on two SQLite databases
that differ only in the length of their loss curves, in one run.

    python bench/bench_queries.py [--jobs 200] [--small 2000] [--large 200000] [--repeat 5]

Each database is built the same way: ONE real sample job ingested by the library (small
steps) into a fresh migrated database, then cloned JOBS times with SQL (job, metadata, probe,
run and loss-curve rows, with new ids and names), each loss curve filled with SMALL or LARGE
points by a recursive CTE running in SQLite's own loop, its curve summary row set to match,
and the template job removed. Then, best of REPEAT each, the library functions of
``tracker.queries.tables`` on both databases: probes, runs (per arm and aggregated) and trend
(a probe field and a run field). Their ratio large/small must stay under 1.5. One arm's
``curve``, which does read points, is timed as a control: it grows with the curve length.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from tracker.analysis.expectations import load_expectations
from tracker.queries import tables
from tracker.queries.runs import run_table
from tracker.queries.selection import JobSelection
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.points import INSERT_SQLITE, chunk_rows
from tracker.store.schema import open_database
from tracker.store.transactions import write_session
from tracker.summary.version import expectations_digest

TEMPLATE_STEPS = 50
EXP = load_expectations()
BYTES_PER_POINT = 22  # an upper bound: a point as a row took 22, in a chunk it takes 1-8
TARGET = 1.5
# The same expression fills the points and the curve summaries, so both agree to the bit;
# decreasing in the step, so the first value is the maximum and the last the minimum.
VALUE = "2.9 + 8.0 / (1.0 + ({step}) / 50.0) + (({run_id}) % 97) * 1e-4"

QUERIES: dict[str, Callable[[Session], Any]] = {
    "probes": lambda s: tables.probes(s, JobSelection()),
    "runs": lambda s: run_table(s, JobSelection(), expectations_digest(EXP)),
    "runs --aggregate-seeds": lambda s: tables.seeds(s, JobSelection()),
    "trend bpp_state (probe)": lambda s: tables.trend(s, JobSelection(), "bpp_state", EXP),
    "trend val_loss (run)": lambda s: tables.trend(s, JobSelection(), "val_loss", EXP),
}
CONTROL = "curve of one arm (control)"


def clone(path: Path, template: Path, jobs: int, steps: int) -> dict[str, Any]:
    """Build one benchmark database at ``path``; return its counts and build time."""
    start = time.perf_counter()
    engine = open_database(f"sqlite:///{path}")
    with write_session(engine) as session, session.begin():
        ingest_job(session, template, name="template")
    engine.dispose()

    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode = DELETE")  # no WAL copy of a bulk load
        connection.execute("PRAGMA synchronous = OFF")
        connection.execute("PRAGMA cache_size = -262144")
        connection.execute("BEGIN")
        (t,) = connection.execute("SELECT id FROM job WHERE name = 'template'").fetchone()
        connection.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            "INSERT INTO job (name, source_path, ingested_at, content_digest) "
            "SELECT printf('job%04d', i), source_path, ingested_at, printf('%064d', i) "
            "FROM n CROSS JOIN job WHERE job.id = ?",
            (jobs, t),
        )
        connection.execute(
            "INSERT INTO job_meta (job_id, key, value) "
            "SELECT id, 'time', strftime('%Y-%m-%dT%H:%M:%SZ', '2026-01-01', "
            "'+' || (id - ?) || ' hours') FROM job WHERE id != ? "
            "UNION ALL SELECT id, 'gpu', CASE WHEN id % 2 THEN 'A10G' ELSE 'L4' END "
            "FROM job WHERE id != ?",
            (t, t, t),
        )
        connection.execute(
            "INSERT INTO probe (job_id, model, variant, n_params, bpp_params, bpp_state, "
            "bpp_grads, bpp_params_state_grads, peak_steady, error, extra) "
            "SELECT j.id, p.model, p.variant, p.n_params, p.bpp_params, "
            "p.bpp_state + (j.id % 7) * 1e-3, p.bpp_grads, p.bpp_params_state_grads, "
            "p.peak_steady, p.error, p.extra FROM job j CROSS JOIN probe p "
            "WHERE p.job_id = ? AND j.id != ? ORDER BY j.id, p.id",
            (t, t),
        )
        connection.execute(
            "INSERT INTO run (job_id, arm, model, variant, seed, val_loss, final_loss, "
            "diverged, extra) SELECT j.id, r.arm, r.model, r.variant, r.seed, r.val_loss, "
            "r.final_loss, r.diverged, r.extra FROM job j CROSS JOIN run r "
            "WHERE r.job_id = ? AND j.id != ? ORDER BY j.id, r.id",
            (t, t),
        )
        first, last = (
            VALUE.format(step="0", run_id="r.id"),
            VALUE.format(step=str(steps - 1), run_id="r.id"),
        )
        connection.execute(
            "INSERT INTO curve (run_id, metric, n_points, first_step, last_step, first_value, "
            f"last_value, min_value, max_value, n_nonfinite) SELECT r.id, 'loss', ?, 0, ?, "
            f"{first}, {last}, {last}, {first}, 0 FROM run r WHERE r.job_id != ? ORDER BY r.id",
            (steps, steps - 1, t),
        )
        curves = connection.execute(
            "SELECT c.id FROM curve c JOIN run r ON r.id = c.run_id WHERE r.job_id != ? "
            "ORDER BY c.id",
            (t,),
        ).fetchall()
        # the values computed by SQLite (the summaries' expression, so they agree to the bit),
        # stored as the tracker stores them: compressed chunks
        fill = (
            "WITH RECURSIVE s(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM s WHERE x < ?) "
            f"SELECT s.x, {VALUE.format(step='s.x', run_id='c.run_id')} "
            "FROM curve c CROSS JOIN s WHERE c.id = ? ORDER BY s.x"
        )
        for (curve_id,) in curves:
            points = np.array(connection.execute(fill, (steps - 1, curve_id)).fetchall())
            rows = chunk_rows(points[:, 0].astype(np.int64), points[:, 1])
            connection.executemany(INSERT_SQLITE, ((curve_id, *row) for row in rows))
        template_curves = (
            "SELECT c.id FROM curve c JOIN run r ON r.id = c.run_id WHERE r.job_id = ?"
        )
        connection.execute(f"DELETE FROM curve_chunk WHERE curve_id IN ({template_curves})", (t,))
        connection.execute(
            "DELETE FROM curve WHERE run_id IN (SELECT id FROM run WHERE job_id = ?)", (t,)
        )
        for table in ("run", "probe", "job_meta", "source_file"):
            connection.execute(f"DELETE FROM {table} WHERE job_id = ?", (t,))
        connection.execute("DELETE FROM job WHERE id = ?", (t,))
        connection.execute("COMMIT")
        counts = {
            table: connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("job", "probe", "run", "curve")
        }
        # the point count from the summaries, and one curve checked against its summary
        counts["point"] = connection.execute("SELECT sum(n_points) FROM curve").fetchone()[0]
        checked = connection.execute(
            "SELECT c.n_points = sum(k.n_points) AND c.min_value = min(k.min_value) "
            "AND c.max_value = max(k.max_value) AND c.last_step = max(k.last_step) "
            "FROM curve c JOIN curve_chunk k ON k.curve_id = c.id WHERE c.id = ?",
            (curves[-1][0],),
        ).fetchone()[0]
        assert checked == 1, "curve summary does not match its points"
    finally:
        connection.close()
    open_database(f"sqlite:///{path}").dispose()  # back to the tracker's own settings (WAL)
    counts["seconds"] = time.perf_counter() - start
    return counts


def best_of(engine: Any, query: Callable[[Session], Any], repeat: int) -> tuple[float, int]:
    best, height = float("inf"), 0
    for _ in range(repeat):
        with Session(engine) as session:
            start = time.perf_counter()
            frame = query(session)
            best = min(best, time.perf_counter() - start)
        height = frame.height
    return best, height


def measure(path: Path, repeat: int) -> dict[str, tuple[float, int]]:
    engine = open_database(f"sqlite:///{path}")
    try:
        results = {name: best_of(engine, query, repeat) for name, query in QUERIES.items()}
        control = JobSelection(jobs=("job0001",))
        results[CONTROL] = best_of(engine, lambda s: tables.curve(s, control, ("ref_s0",)), repeat)
    finally:
        engine.dispose()
    return results


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--small", type=int, default=2_000, help="loss points per arm")
    parser.add_argument("--large", type=int, default=200_000, help="loss points per arm")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: /tmp)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-queries-") as tmp:
        work = Path(tmp)
        template = write_sample_job(work / "template", steps=TEMPLATE_STEPS)
        arms = len(list(template.glob("*.csv")))
        need = args.jobs * arms * (args.small + args.large) * BYTES_PER_POINT
        free = shutil.disk_usage(work).free
        print(f"disk: {free / 1e9:.1f} GB free at {work}, about {need / 1e9:.1f} GB needed")
        if need * 1.2 > free:
            sys.exit("not enough disk space: lower --jobs or --large, or choose --dir")

        built, timings = {}, {}
        for label, steps in (("small", args.small), ("large", args.large)):
            path = work / f"{label}.db"
            built[label] = clone(path, template, args.jobs, steps)
            built[label]["bytes"] = size(path)
            timings[label] = measure(path, args.repeat)

    print(
        f"databases: {args.jobs} jobs x {arms} arms, one real sample job cloned; "
        f"loss curves only, {args.small:,} vs {args.large:,} points per arm"
    )
    for label, steps in (("small", args.small), ("large", args.large)):
        b = built[label]
        print(
            f"  {label:5} {steps:>9,} steps/arm: {b['point']:>13,} points, "
            f"{b['bytes'] / 2**20:>9,.1f} MiB, built in {b['seconds']:6.1f} s "
            f"({b['job']} jobs, {b['probe']} probes, {b['run']} runs, {b['curve']} curves)"
        )
    print(f"\nbest of {args.repeat}, library functions (tracker.queries.tables):")
    print(f"  {'query':28} {'rows':>6} {'small ms':>9} {'large ms':>9} {'ratio':>6}")
    failed = []
    for name in [*QUERIES, CONTROL]:
        (small, rows), (large, _) = timings["small"][name], timings["large"][name]
        ratio = large / small
        verdict = ""
        if name in QUERIES:
            verdict = "ok" if ratio < TARGET else f"FAIL (target < {TARGET})"
            if ratio >= TARGET:
                failed.append(name)
        print(
            f"  {name:28} {rows:>6} {small * 1e3:9.1f} {large * 1e3:9.1f} {ratio:6.2f}  {verdict}"
        )
    print(
        f"\nsummary queries: {'all under' if not failed else 'NOT all under'} the {TARGET} "
        "ratio; the control reads points and grows with them"
    )
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
