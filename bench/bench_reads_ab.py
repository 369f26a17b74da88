"""``api.runs`` and a whole-curve ``api.curve``: this tracker against a baseline commit, in one
run (issue 43: both had become dearer in CPU since 74e8345).

    python bench/bench_reads_ab.py [--base 74e8345] [--jobs 200] [--steps 2000]
                                   [--long 400000] [--repeat 7] [--rounds 3]

The same job folders (JOBS sample jobs of STEPS steps, and one of LONG steps whose first arm's
loss curve is read whole) are ingested by each tracker into its own SQLite file (a process
per tracker: BASE is that commit's code, ``git archive`` into a temporary folder and first on
``sys.path``); then, in a fresh process per tracker, the CPU seconds (``process_time``) of
``api.runs(db)`` and of ``api.curve(db, ARM, job=LONG)``, best of REPEAT after one warm-up,
``db`` the URL (a new engine each call, as a script's) and then one engine (as a server's);
ROUNDS such processes a tree, the trees alternating, and the best of each read kept.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import REPO
from tracker.sample import DEFAULT_ARMS, write_sample_job

BASE = "74e8345"
LONG = "long"
CHILD = """
import sys, time
from tracker import api
db, arm, long, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def best(work):
    work()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return min(times)
from sqlalchemy import create_engine
engine = create_engine(db)  # one engine: its compiled statements kept, as in a server
runs = best(lambda: api.runs(db))
curve = best(lambda: api.curve(db, arm, job=long))
runs_engine = best(lambda: api.runs(engine))
curve_engine = best(lambda: api.curve(engine, arm, job=long))
print(runs, curve, runs_engine, curve_engine, len(api.runs(db)))
"""


def checkout(commit: str, work: Path) -> Path:
    target = work / "base"
    target.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def run(args: list[str], tree: Path) -> str:
    """``python ARGS`` with ``tree``'s tracker first on the path, in its folder."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, *args], check=True, capture_output=True, text=True, env=env, cwd=tree
    )
    return done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=BASE)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--long", type=int, default=400_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_reads_ab_") as scratch:
        work = Path(scratch)
        folders = [
            str(write_sample_job(work / "jobs" / f"job{n:05d}", steps=args.steps, seed=n))
            for n in range(args.jobs)
        ]
        folders.append(str(write_sample_job(work / "jobs" / LONG, steps=args.long)))
        trees = {args.base: checkout(args.base, work), "this tracker": REPO}
        urls = {name: f"sqlite:///{work / (name.replace(' ', '_') + '.db')}" for name in trees}
        for name, tree in trees.items():
            run(["-m", "tracker", "--db", urls[name], "ingest", *folders], tree)
        found: dict[str, list[float]] = {}
        # the trees' processes alternate, each tree's best kept: load that comes and goes on
        # the machine weighs on both alike
        for _ in range(args.rounds):
            for name, tree in trees.items():
                child = ["-c", CHILD, urls[name], DEFAULT_ARMS[0], LONG, str(args.repeat)]
                line = run(child, tree)
                times = [float(x) for x in line.split()[:4]]
                found[name] = [
                    min(pair) for pair in zip(found.get(name, times), times, strict=True)
                ]
                print(f"{name}: {line.strip()}", file=sys.stderr)
    base, head = found[args.base], found["this tracker"]
    print(f"{args.jobs} jobs of {args.steps} steps; curve of {args.long:,} points; CPU, best of")
    print(f"{args.repeat} in each of {args.rounds} processes a tree, alternating\n")
    print(f"| read | {args.base} | this tracker | ratio |")
    print("|---|---|---|---|")
    labels = ("api.runs", "api.curve (whole curve)")
    labels += tuple(f"{label}, one engine" for label in labels)
    for i, label in enumerate(labels):
        ratio = head[i] / base[i]
        print(f"| {label} | {base[i] * 1e3:.1f} ms | {head[i] * 1e3:.1f} ms | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
