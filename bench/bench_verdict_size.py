"""Kept verdicts per job: the bytes of the verdict tables on SQLite over the jobs stored, and
the ingest's CPU a job, this tracker against BASE in the same run.

    python bench/bench_verdict_size.py [--jobs 100] [--steps 2000] [--base COMMIT] [--rounds 2]

The workload: JOBS sample jobs (``tracker.sample``, a seed each), written once and ingested by
each tree into a SQLite file of its own, job by job as ``tracker ingest`` does (the child of
``bench_summary_size``). Size: SQLite's ``dbstat`` pages (``pgsize``) of every table and index
whose name holds ``verdict`` (``job_verdicts``, ``verdict_key`` and its unique index), over the
jobs. CPU: of the whole ingest process, imports included, the best of ROUNDS, over the jobs.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from pathlib import Path

from bench import compile_tracker
from bench.bench_summary_size import base_tree, timed_child
from tracker.sample import write_sample_job

BASE = "e0de496"  # the last commit keeping every verdict's texts in its job's row


def verdict_bytes(path: Path) -> dict[str, int]:
    """The pages' bytes of each verdict table and index of the file."""
    db = sqlite3.connect(path)
    rows = db.execute(
        "SELECT name, sum(pgsize) FROM dbstat WHERE name LIKE '%verdict%' GROUP BY name"
    ).fetchall()
    db.close()
    return dict(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--base", default=BASE)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    compile_tracker()
    with (
        tempfile.TemporaryDirectory(prefix="bench-verdicts-") as scratch,
        base_tree(args.base) as base,
    ):
        work = Path(scratch)
        jobs = work / "jobs"
        for seed in range(args.jobs):
            write_sample_job(jobs / f"job{seed:04d}", seed=seed, steps=args.steps)
        trees = {"base": base, "this": Path(__file__).resolve().parents[1]}
        cpu: dict[str, list[float]] = {label: [] for label in trees}
        sizes: dict[str, dict[str, int]] = {}
        for _ in range(args.rounds):
            for label, tree in trees.items():
                path = work / f"{label}.db"
                path.unlink(missing_ok=True)
                _, seconds = timed_child(tree, "build", f"sqlite:///{path}", str(jobs))
                cpu[label].append(seconds)
                sizes[label] = verdict_bytes(path)
        for label in trees:
            total = sum(sizes[label].values())
            parts = ", ".join(
                f"{name} {size / args.jobs:,.0f}" for name, size in sizes[label].items()
            )
            print(
                f"{label}: {total / args.jobs:,.0f} B of verdicts a job ({parts}); "
                f"ingest CPU {min(cpu[label]) / args.jobs * 1000:.1f} ms a job"
            )
        ratio = sum(sizes["this"].values()) / sum(sizes["base"].values())
        cpu_ratio = min(cpu["this"]) / min(cpu["base"])
        print(f"bytes this/base: {ratio:.3f}; CPU this/base: {cpu_ratio:.3f}")


if __name__ == "__main__":
    main()
