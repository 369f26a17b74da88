"""Benchmark: `tracker report` against the study's reference script, same job, same run.

Generates a sample job of 4 arms x 100,000 steps (plus the memory probes), ingests it into
a temporary SQLite database, then times, best of 3 each:

  (a) the tracker's report of that job: the library's ``generate_report`` in this process
      (imports already paid), and ``python -m tracker report --job NAME --out DIR`` in a
      fresh process when the CLI has that command (imports included);
  (b) the reference ``python analyze_job2.py JOB_DIR`` in a temporary working directory
      (a fresh process: its imports are included, as they always are for a script);
  (c) for the record, ``tracker ingest JOB_DIR`` into a fresh database, where the job's
      analysis and summary are made once (the report reads them), and ingest + report.

Each is timed by the wall clock and by CPU (this process's and its children's: other work
on the machine inflates it less). The script then compares the HTML written for the job (the
report's per-job pages, plotly.min.js excluded, against the reference's two figure files).
Targets: >= 3x faster, >= 5x smaller.

Usage: python bench/bench_report.py [--reference PATH] [--steps N] [--repeat N]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session

from bench import REPO, compile_tracker
from tracker.analysis.expectations import load_expectations
from tracker.queries.selection import JobSelection
from tracker.report import generate_report
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.schema import open_database
from tracker.store.transactions import write_session

DEFAULT_REFERENCE = REPO.parent / "shared" / "reference" / "analyze_job2.py"
JOB = "job2"
SPEED_TARGET, SIZE_TARGET = 3.0, 5.0


def cpu_seconds() -> float:
    """CPU time of this process and of its children waited for (each fresh process's)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def best_of(repeat: int, run: Callable[[int], None]) -> tuple[float, float]:
    """The best wall time and the best CPU time (which other work on the machine inflates
    less) of ``repeat`` runs."""
    walls, cpus = [], []
    for i in range(repeat):
        start, cpu = time.perf_counter(), cpu_seconds()
        run(i)
        walls.append(time.perf_counter() - start)
        cpus.append(cpu_seconds() - cpu)
    return min(walls), min(cpus)


def html_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.html"))


def mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    reference = args.reference.resolve()
    if not reference.is_file():
        print(f"reference script not found: {reference} (pass --reference PATH)")
        return 2

    with tempfile.TemporaryDirectory(prefix="bench_report_") as tmp_name:
        tmp = Path(tmp_name)
        start = time.perf_counter()
        job_dir = write_sample_job(tmp / JOB, steps=args.steps)
        url = f"sqlite:///{tmp / 'bench.db'}"
        engine = open_database(url)
        with write_session(engine) as session, session.begin():
            ingested = ingest_job(session, job_dir)
        print(f"job: {ingested.outcome_line()} ({time.perf_counter() - start:.1f} s to make)")
        exp = load_expectations()
        compile_tracker()

        def library(i: int) -> None:
            with Session(engine) as session:
                generate_report(session, tmp / f"lib{i}", exp, JobSelection(jobs=(JOB,)))

        def cli(i: int) -> None:
            command = [sys.executable, "-m", "tracker", "--db", url, "report"]
            command += ["--job", JOB, "--out", str(tmp / f"cli{i}")]
            subprocess.run(command, check=True, capture_output=True, cwd=REPO)

        def ingest(i: int) -> None:
            # into a fresh database: the job's analysis and summary are made here, once
            command = [sys.executable, "-m", "tracker", "--db", f"sqlite:///{tmp / f'in{i}.db'}"]
            command += ["ingest", str(job_dir)]
            subprocess.run(command, check=True, capture_output=True, cwd=REPO)

        def script(i: int) -> None:
            cwd = tmp / f"ref{i}"
            cwd.mkdir()
            subprocess.run(
                [sys.executable, str(reference), str(job_dir)],
                check=True,
                cwd=cwd,
                stdout=subprocess.DEVNULL,
            )

        t_ref, c_ref = best_of(args.repeat, script)
        t_lib, c_lib = best_of(args.repeat, library)
        t_cli, c_cli = best_of(args.repeat, cli)
        t_ingest, c_ingest = best_of(args.repeat, ingest)

        ref_out = tmp / "ref0" / "repro_flashoptim" / "outputs" / "job2"
        ref_size = html_bytes(ref_out)
        report_size = html_bytes(tmp / "lib0" / JOB)
        index_size = (tmp / "lib0" / "index.html").stat().st_size
        plotly_size = (tmp / "lib0" / "plotly.min.js").stat().st_size
        engine.dispose()

    speed = t_ref / t_lib
    size = ref_size / report_size
    print(f"best of {args.repeat}, {args.steps:,} steps x 4 arms; wall time, then CPU time")
    print(f"  reference script (fresh process)      {t_ref:7.3f} s           {c_ref:7.3f} s")
    rows = [
        ("tracker generate_report (library)  ", t_lib, c_lib),
        ("tracker report (CLI, fresh process)", t_cli, c_cli),
    ]
    for label, wall, cpu in rows:
        print(f"  {label}   {wall:7.3f} s {t_ref / wall:5.1f}x   {cpu:7.3f} s {c_ref / cpu:5.1f}x")
    print(f"  tracker ingest (CLI, fresh process)   {t_ingest:7.3f} s           {c_ingest:7.3f} s")
    both, both_cpu = t_cli + t_ingest, c_cli + c_ingest
    print(f"  ingest + report                       {both:7.3f} s {t_ref / both:5.1f}x   ", end="")
    print(f"{both_cpu:7.3f} s {c_ref / both_cpu:5.1f}x")
    print("HTML for the job")
    print(f"  reference: mem_scaling.html + gpt_trajectories.html   {mb(ref_size)}")
    print(f"  tracker:   {JOB}/*.html (4 pages)                      {mb(report_size)}")
    print(f"  size ratio {size:.1f}x smaller")
    print(
        f"  (not counted: index.html {mb(index_size)}, plotly.min.js {mb(plotly_size)}, "
        "written once per report)"
    )
    cli_speed = t_ref / t_cli
    verdicts = [
        ("speed, report work (library)", speed, SPEED_TARGET),
        ("speed, whole command (fresh process)", cli_speed, SPEED_TARGET),
        ("speed, whole command (fresh process), CPU", c_ref / c_cli, SPEED_TARGET),
        ("HTML size", size, SIZE_TARGET),
    ]
    for what, ratio, target in verdicts:
        print(
            f"target {what} >= {target:g}x: {'met' if ratio >= target else 'MISSED'} ({ratio:.1f}x)"
        )
    return 0 if all(ratio >= target for _, ratio, target in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
