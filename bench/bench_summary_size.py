"""Many short jobs: bytes per stored point of the whole database file, and the cold report,
``claims`` and job pages, this tracker against BASE in the same run.

    python bench/bench_summary_size.py [--jobs 300] [--steps 5000] [--base COMMIT] [--pages 20]

The workload: JOBS sample jobs (``tracker.sample``, a seed each: 4 arms x STEPS steps
logging loss, lr and step_ms, and the memory probes), written once and ingested by each
tracker into a SQLite file of its own, job by job as ``tracker ingest`` does. BASE's tree is a
``git worktree`` of that commit in a temporary folder, run by this interpreter with it first on
``sys.path`` (and without site's hooks, which would import this checkout). Then, for each:

1. size: the file after VACUUM over the points stored (sum of ``curve.n_points``), and the
   bytes of ``job_summary`` (SQLite's ``dbstat``); the ingest's time;
2. report: ``tracker report --force`` into an empty folder (in ``/dev/shm`` where there is
   one: see ``report_folder``), in a fresh process;
3. claims: ``tracker claims``, in a fresh process;
4. job pages: a fresh server (``create_app``, in-process client) asked for the pages of
   PAGES jobs, each its first visit: median and total.

2-4 run ROUNDS times, the two trees in turn; each figure is the best of its rounds (per page
for the pages). Times are of the work inside each process (after its imports); beside them
the CPU seconds (``*_cpu``: of the whole report or claims process and its worker, imports
included; of each page's request), which a machine shared with other work inflates less
than the wall clock. Only the ratios are comparable across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import REPO, compile_tracker
from tracker.sample import write_sample_job

BASE = "4665314"  # the last commit storing the summary as JSON text
ROUND_FIGURES = ("report_s", "report_cpu_s", "claims_s", "claims_cpu_s")
CHILD = r"""
import json, sys, time
from pathlib import Path
part, url = sys.argv[1], sys.argv[2]
if part == "build":
    from tracker.services.ingest import ingest_job
    try:  # the store's modules since the redesign; the baseline tree's before it
        from tracker.store.schema import open_database
        from tracker.store.transactions import write_session
    except ImportError:
        from tracker.store.db import open_database, write_session
    engine = open_database(url)
    start = time.perf_counter()
    for i, job in enumerate(sorted(Path(sys.argv[3]).iterdir())):
        meta = {"time": f"2026-01-{1 + i // 24:02d}T{i % 24:02d}:00:00Z", "gpu": "A10G"}
        with write_session(engine) as session, session.begin():
            ingest_job(session, job, name=job.name, meta=meta)
    print(time.perf_counter() - start)
elif part == "pages":
    from fastapi.testclient import TestClient
    from tracker.server import create_app
    times, cpu = [], []
    with TestClient(create_app(url), base_url="http://127.0.0.1:8765") as client:
        for name in sys.argv[3:]:
            start, start_cpu = time.perf_counter(), time.process_time()
            response = client.get(f"/jobs/{name}/")
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            assert response.status_code == 200, response.text
    print(json.dumps([times, cpu]))
else:
    from tracker.cli import main
    sys.argv = ["tracker", "--db", url, *sys.argv[3:]]
    start = time.perf_counter()
    try:
        main()
    except SystemExit as done:
        assert not done.code, done.code
    print(time.perf_counter() - start, file=sys.stderr)
"""


@contextmanager
def base_tree(commit: str) -> Iterator[Path]:
    """``commit``'s tree, checked out in a temporary folder for the duration."""
    folder = Path(tempfile.mkdtemp(prefix="bench-base-"))
    tree = folder / "tree"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(tree), commit], check=True
    )
    try:
        yield tree
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=True
        )
        shutil.rmtree(folder, ignore_errors=True)


def child(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The child script run by ``tree``'s tracker."""
    done, _ = timed_child(tree, *args)
    return done


def timed_child(tree: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``child``, and the CPU seconds it and its own children took (imports included)."""
    env = {"PYTHONPATH": f"{tree}:{sysconfig.get_paths()['purelib']}", "PATH": "/usr/bin:/bin"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-S", "-c", CHILD, *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"{tree}: {' '.join(args[:1] + args[2:])} failed:\n{done.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return done, cpu


def size(path: Path) -> tuple[float, int, int]:
    """The file's bytes per stored point after VACUUM, its points and ``job_summary``'s bytes."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("VACUUM")
    points = db.execute("SELECT sum(n_points) FROM curve").fetchone()[0]
    summary = db.execute(
        "SELECT sum(pgsize) FROM dbstat WHERE name LIKE '%job_summary%'"
    ).fetchone()[0]
    db.close()
    return path.stat().st_size / points, points, summary


def build(tree: Path, label: str, jobs: Path, work: Path) -> tuple[str, dict[str, float]]:
    """``tree``'s database of the workload: its URL, its ingest time and its size."""
    path = work / f"{label}.db"
    url = f"sqlite:///{path}"
    print(f"{label}: ingesting {len(list(jobs.iterdir()))} jobs ...", flush=True)
    built = float(child(tree, "build", url, str(jobs)).stdout)
    per_point, points, summary = size(path)
    print(f"  ingest {built:.1f} s; {per_point:.3f} B/point over {points:,} points", flush=True)
    return url, {
        "bytes_per_point": per_point,
        "file_mb": path.stat().st_size / 1e6,
        "summary_mb": summary / 1e6,
        "ingest_s": built,
    }


def report_folder(work: Path) -> Path:
    """Where a round's report goes: a folder in memory (``/dev/shm``) where there is one, as
    deleting and writing 2,100 files a round on a shared virtual disk varies by more than the
    difference measured; both trees write the same files."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm / f"bench-report-{os.getpid()}"
    return work / "report"


def timed(tree: Path, url: str, out: Path, pages: list[str]) -> dict[str, list[float]]:
    """One round of the cold report, ``claims`` and the job pages, each in a fresh process."""
    shutil.rmtree(out, ignore_errors=True)
    report, report_cpu = timed_child(tree, "cli", url, "report", "--out", str(out), "--force")
    shutil.rmtree(out)
    claims, claims_cpu = timed_child(tree, "cli", url, "claims")
    page_times, page_cpu = json.loads(child(tree, "pages", url, *pages).stdout)
    return {
        "report_s": [float(report.stderr.strip().splitlines()[-1])],
        "report_cpu_s": [report_cpu],
        "claims_s": [float(claims.stderr.strip().splitlines()[-1])],
        "claims_cpu_s": [claims_cpu],
        "pages": page_times,
        "pages_cpu": page_cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--base", default=BASE)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    compile_tracker()
    with (
        tempfile.TemporaryDirectory(prefix="bench-summary-") as scratch,
        base_tree(args.base) as base,
    ):
        work = Path(scratch)
        jobs = work / "jobs"
        for i in range(args.jobs):
            write_sample_job(jobs / f"job{i + 1:04d}", seed=i, steps=args.steps)
        step = max(1, args.jobs // args.pages)
        pages = [f"job{i + 1:04d}" for i in range(0, args.jobs, step)][: args.pages]
        trees = {"base": base, "this": REPO}
        built = {label: build(tree, label, jobs, work) for label, tree in trees.items()}
        rounds: dict[str, list[dict[str, list[float]]]] = {label: [] for label in trees}
        for n in range(args.rounds):  # the two trees in turn: both see the same machine
            for label, tree in trees.items():
                rounds[label].append(timed(tree, built[label][0], report_folder(work), pages))
                print(f"round {n + 1}, {label}: {rounds[label][-1]}", flush=True)
    results = {}
    for label in trees:
        each = rounds[label]
        page_times = [min(r["pages"][i] for r in each) for i in range(len(pages))]
        page_cpu = [min(r["pages_cpu"][i] for r in each) for i in range(len(pages))]
        results[label] = {
            **built[label][1],
            **{key: min(r[key][0] for r in each) for key in ROUND_FIGURES},
            "page_median_ms": 1e3 * statistics.median(page_times),
            "page_cpu_median_ms": 1e3 * statistics.median(page_cpu),
            "pages_s": sum(page_times),
        }
    workload = f"{args.jobs} jobs x 4 arms x {args.steps} steps x 3 columns"
    print(f"\n| {workload} | base {args.base} | this | ratio |")
    print("|---|---|---|---|")
    for key in results["this"]:
        a, b = results["base"][key], results["this"][key]
        print(f"| {key} | {a:.3f} | {b:.3f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
