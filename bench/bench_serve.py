"""``tracker serve`` on a 1,000-job database: latency per page, concurrent load, memory.

    python bench/bench_serve.py [--backend sqlite|postgresql|both] [--jobs 1000]
                                [--clients 32] [--seconds 30]

The database (cached under ~/.cache/tracker-bench, outside git; PostgreSQL: a schema of
TRACKER_TEST_POSTGRES_URL's database, kept between runs) holds JOBS jobs ingested by the
library from a few sample job directories (4 arms x STEPS steps, distinct seeds; each
ingested under many names, with a time and a gpu), plus one job whose single arm has
1,000,000 steps for the curve zoom. A real ``tracker serve`` process on loopback, then:

1. one client, one request at a time: p50/p95 of ``/api/jobs``, ``/``, job pages (first
   visits, which read the job's summary and draw its figures, and visits again, cached),
   ``/compare`` of two jobs, and a zoom: ``/api/curve`` of a random 1,000-step window of the
   1,000,000-step curve (every raw point of it); ``/api/plot`` of 10 runs x 20,000 steps
   (smoothed, a random window of 2,000 to 20,000 steps) and of the 1,000,000-step curve
   smoothed and zoomed to a random 1,000-step window; the 10 runs against wall time, zoomed
   to a random window of seconds;
2. CLIENTS concurrent clients (asyncio + httpx) for SECONDS on that mix: requests, errors,
   p95 per page under load;
3. the server's peak resident memory (VmHWM).

and the runs table, ``/api/runs`` sorted and filtered over every job's arms.

Targets (issue 12): p95 <= 100 ms for /api/jobs and a zoom, <= 300 ms for / and a job page;
no error under load; peak memory <= 500 MB. Issue 20: p95 <= 150 ms for /api/runs sorted
and filtered, <= 200 ms for the 10-run plot (against the step or the wall time), <= 100 ms
for the zoomed 1M-step plot.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from itertools import pairwise
from pathlib import Path

import httpx
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import Session

from tracker.models import Job
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.schema import open_database
from tracker.store.transactions import in_write_transaction

CACHE = Path.home() / ".cache" / "tracker-bench"
POSTGRES_ENV = "TRACKER_TEST_POSTGRES_URL"
SCHEMA = "bench_serve"
STEPS = 2_000
SEEDS = 8  # distinct sample jobs; each is ingested under JOBS / SEEDS names
LONG_STEPS = 1_000_000
ZOOM = 1_000
RUNNING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")
PLOT_STEPS = 20_000
PLOT_JOBS = ("plot0", "plot1", "plot2")  # 4 arms each of PLOT_STEPS steps: 10 runs plotted
PLOT_RUNS = [f"{job}/{arm}" for job in PLOT_JOBS for arm in ("ref_s0", "flash_s0", "ref_s1")]
PLOT_RUNS.append("plot0/linear_s0")
TARGETS_MS = {
    "/api/jobs": 100,
    "/": 300,
    "job page (first visit)": 300,
    "zoom": 100,
    "/api/runs sorted, filtered": 150,
    "plot 10 x 20k": 200,
    "plot 10 x 20k, x=time": 200,
    "plot 1M zoomed": 100,
}
RUNS_QUERIES = (  # the runs table of every job, sorted by a number or text, filtered two ways
    "/api/runs?sort=-final_loss&where=gpu=A10G",
    "/api/runs?sort=val_loss&q=flash&verdict=FAIL&limit=50",
    "/api/runs?sort=-job&q=l4+ref&offset=100",
)


def database_url(backend: str, jobs: int) -> str:
    if backend == "sqlite":
        CACHE.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{CACHE / f'serve-{jobs}.db'}"
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        sys.exit(f"{POSTGRES_ENV} is not set: no PostgreSQL server to benchmark")
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    schema = f"{SCHEMA}_{jobs}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    admin.dispose()
    separator = "&" if "?" in server else "?"
    return f"{server}{separator}options=-csearch_path%3D{schema}"


def build(url: str, jobs: int) -> float:
    """Ingest the benchmark's jobs unless the database holds them already; seconds taken."""
    engine = open_database(url)
    with Session(engine) as session:
        present = session.scalar(select(func.count()).select_from(Job)) or 0
    if present == jobs + 1 + len(PLOT_JOBS):
        engine.dispose()
        return 0.0
    start = time.perf_counter()
    sources = CACHE / f"serve-jobs-{STEPS}"
    directories = [
        write_sample_job(sources / f"seed{seed}", seed=seed, steps=STEPS)
        if not (sources / f"seed{seed}").is_dir()
        else sources / f"seed{seed}"
        for seed in range(SEEDS)
    ]
    if not (sources / "long").is_dir():
        write_sample_job(sources / "long", steps=LONG_STEPS, arms=("ref_s0",), probes=False)
    with Session(engine) as session:
        have = set(session.scalars(select(Job.name)))
    for i in range(jobs):
        name = f"job{i:04d}"
        if name in have:
            continue
        meta = {
            "time": f"2026-{1 + i // 100 % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
            "gpu": "A10G" if i % 3 else "L4",
        }
        work = partial(ingest_job, directory=directories[i % SEEDS], name=name, meta=meta)
        in_write_transaction(engine, work)
        if i % 100 == 99:
            print(f"  {i + 1} jobs ingested", flush=True)
    if "long" not in have:
        in_write_transaction(engine, partial(ingest_job, directory=sources / "long", name="long"))
    for seed, name in enumerate(PLOT_JOBS):
        directory = sources / f"plot{seed}"
        if not directory.is_dir():
            write_sample_job(directory, seed=100 + seed, steps=PLOT_STEPS, probes=False)
        if name not in have:
            in_write_transaction(engine, partial(ingest_job, directory=directory, name=name))
    engine.dispose()
    return time.perf_counter() - start


class Server:
    """A ``tracker serve`` process on a free loopback port, ready once it says so; of the
    sources in ``before`` (another commit's tree), if given."""

    def __init__(self, url: str, before: Path | None = None) -> None:
        env, python, cwd = dict(os.environ), [sys.executable], None
        if before is not None:  # without site's hooks, which import this tree's tracker
            env["PYTHONPATH"] = f"{before}{os.pathsep}{sysconfig.get_paths()['purelib']}"
            python, cwd = [sys.executable, "-S"], before
        command = [*python, "-m", "tracker", "--db", url, "serve", "--port", "0"]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )
        assert self.process.stderr is not None
        for line in self.process.stderr:
            found = RUNNING.search(line)
            if found:
                self.base = found.group(1)
                break
        else:
            sys.exit("the server ended before listening")
        # keep reading its log, so that it never blocks on a full pipe
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for _line in self.process.stderr:
            pass

    def peak_rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kib = int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]
        return kib / 1024

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def zoom_path(rng: random.Random) -> str:
    start = rng.randrange(0, LONG_STEPS - ZOOM)
    return f"/api/curve?job=long&arm=ref_s0&start={start}&end={start + ZOOM - 1}"


def plot_path(rng: random.Random) -> str:
    """The 10-run plot, smoothed, zoomed to a random window of 2,000 steps or more."""
    width = rng.randrange(2_000, PLOT_STEPS + 1)
    start = rng.randrange(0, PLOT_STEPS - width + 1)
    runs = "&".join(f"run={run}" for run in PLOT_RUNS)
    return f"/api/plot?{runs}&smooth=0.9&y=log&start={start}&end={start + width - 1}"


def plot_time_path(rng: random.Random) -> str:
    """The 10-run plot against wall time (the sum of step_ms), smoothed, zoomed to a random
    window of 700 to 5,000 seconds (the sample's 20,000 steps take about 7,000)."""
    width = rng.uniform(700, 5_000)
    start = rng.uniform(0, 7_000 - width)
    runs = "&".join(f"run={run}" for run in PLOT_RUNS)
    return f"/api/plot?{runs}&smooth=0.9&x=time&start_s={start:.3f}&end_s={start + width:.3f}"


def plot_zoom_path(rng: random.Random) -> str:
    start = rng.randrange(0, LONG_STEPS - ZOOM)
    return f"/api/plot?run=long/ref_s0&smooth=0.9&start={start}&end={start + ZOOM - 1}"


def cold_plots(client: httpx.Client, rng: random.Random) -> dict[str, list[float]]:
    """The first plot of a smoothing: each curve read whole and smoothed (then kept)."""
    timings: dict[str, list[float]] = defaultdict(list)
    for label, path in (
        ("plot 1M (first)", plot_zoom_path),
        ("plot 10 x 20k (first)", plot_path),
        ("plot 10 x 20k, x=time (first)", plot_time_path),
    ):
        start = time.perf_counter()
        response = client.get(path(rng))
        timings[label].append((time.perf_counter() - start) * 1000)
        if response.status_code != 200:
            sys.exit(f"{label}: {response.status_code} {response.text[:200]}")
    return timings


def sequential(base: str, jobs: int, rng: random.Random) -> dict[str, list[float]]:
    """Latencies (ms) of one client, one request at a time."""
    timings: dict[str, list[float]] = defaultdict(list)
    names = [f"job{i:04d}" for i in rng.sample(range(jobs), min(40, jobs))]
    plan: list[tuple[str, str]] = []
    plan += [("/api/jobs", "/api/jobs")] * 40
    plan += [("/", "/")] * 40
    plan += [("job page (first visit)", f"/jobs/{name}/") for name in names]
    plan += [("job page (again)", f"/jobs/{name}/") for name in names]
    plan += [("compare", f"/compare?a={a}&b={b}") for a, b in pairwise(names)]
    plan += [("zoom", zoom_path(rng)) for _ in range(40)]
    plan += [("/api/runs sorted, filtered", RUNS_QUERIES[i % 3]) for i in range(60)]
    plan += [("plot 10 x 20k", plot_path(rng)) for _ in range(40)]
    plan += [("plot 10 x 20k, x=time", plot_time_path(rng)) for _ in range(40)]
    plan += [("plot 1M zoomed", plot_zoom_path(rng)) for _ in range(40)]
    with httpx.Client(base_url=base, timeout=120) as client:
        client.get("/api/jobs")  # connect, warm the first query
        timings.update(cold_plots(client, rng))
        for label, path in plan:
            start = time.perf_counter()
            response = client.get(path)
            timings[label].append((time.perf_counter() - start) * 1000)
            if response.status_code != 200:
                sys.exit(f"{path}: {response.status_code} {response.text[:200]}")
    return timings


async def load(base: str, jobs: int, clients: int, seconds: float) -> tuple[dict, int, int]:
    """CLIENTS clients, each requesting a random page of the mix as fast as answered."""
    timings: dict[str, list[float]] = defaultdict(list)
    errors = 0
    deadline = time.perf_counter() + seconds
    choices: list[tuple[str, Callable[[random.Random], str]]] = [
        ("/api/jobs", lambda rng: "/api/jobs"),
        ("/", lambda rng: "/"),
        ("job page", lambda rng: f"/jobs/job{rng.randrange(jobs):04d}/"),
        ("zoom", zoom_path),
        ("/api/runs", lambda rng: rng.choice(RUNS_QUERIES)),
        ("plot 10 x 20k", plot_path),
        ("plot 10 x 20k, x=time", plot_time_path),
        ("plot 1M zoomed", plot_zoom_path),
    ]

    async def client(seed: int) -> None:
        nonlocal errors
        rng = random.Random(seed)
        limits = httpx.Limits(max_connections=1)
        async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as http:
            while time.perf_counter() < deadline:
                label, path = rng.choice(choices)
                start = time.perf_counter()
                try:
                    response = await http.get(path(rng))
                    ok = response.status_code == 200
                except httpx.HTTPError:
                    ok = False
                timings[label].append((time.perf_counter() - start) * 1000)
                errors += not ok

    await asyncio.gather(*(client(seed) for seed in range(clients)))
    total = sum(len(v) for v in timings.values())
    return timings, total, errors


def run(backend: str, jobs: int, clients: int, seconds: float) -> None:
    url = database_url(backend, jobs)
    built = build(url, jobs)
    print(f"\n## {backend}: {jobs} jobs + one of {LONG_STEPS:,} steps"
          + (f" (built in {built:.0f} s)" if built else " (cached)"))  # fmt: skip
    server = Server(url)
    try:
        rng = random.Random(7)
        timings = sequential(server.base, jobs, rng)
        print("\n| one client | requests | p50 | p95 | target (p95) |\n|---|---|---|---|---|")
        for label, values in timings.items():
            target = TARGETS_MS.get(label)
            print(
                f"| {label} | {len(values)} | {statistics.median(values):.0f} ms "
                f"| {percentile(values, 0.95):.0f} ms | "
                + (f"<= {target} ms" if target else "")
                + " |"
            )
        loaded, total, errors = asyncio.run(load(server.base, jobs, clients, seconds))
        print(
            f"\n{clients} clients for {seconds:.0f} s: {total} requests "
            f"({total / seconds:.0f}/s), {errors} errors"
        )
        print("\n| under load | requests | p50 | p95 |\n|---|---|---|---|")
        for label, values in loaded.items():
            print(
                f"| {label} | {len(values)} | {statistics.median(values):.0f} ms "
                f"| {percentile(values, 0.95):.0f} ms |"
            )
        print(f"\nserver peak RSS: {server.peak_rss_mb():.0f} MB (target <= 500 MB)")
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    backends = ("sqlite", "postgresql") if args.backend == "both" else (args.backend,)
    for backend in backends:
        run(backend, args.jobs, args.clients, args.seconds)


if __name__ == "__main__":
    main()
