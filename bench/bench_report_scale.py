"""Benchmark: the report of many jobs (default 1,000 jobs x 4 arms x 20,000 steps).

    python bench/bench_report_scale.py [--jobs 1000] [--steps 20000] [--cache DIR]

The database is built once and kept in ``--cache`` (default ~/.cache/tracker-bench; outside
git) for later runs: ``TEMPLATES`` sample jobs (``tracker.sample``, different seeds,
one with a regressed flash optimizer state) ingested by ``ingest_job``, then cloned with SQL
to JOBS jobs (names, ``time`` and ``gpu`` metadata, probes with a small per-job offset, runs,
the loss curves with a per-job offset; the rows kept at ingest, verdicts and summaries, as
the template's). Then:

  1. cold: ``tracker report`` into an empty folder, in a fresh process (its pool included);
  2. after one more job (a new sample job ingested by the library): ``tracker report`` again;
  3. the size of ``index.html``;
  4. the load event of pages in Chromium (Debian's, via Playwright, network blocked), and when
     every figure is drawn (after the load event): the index and the four pages of the
     newest, the oldest, the new and 5 random jobs, after one page loaded first and not
     counted (the browser's start);
  5. peak memory of the report: the largest sum, over its processes, of their proportional
     set sizes (PSS: pages shared between them count once), sampled every 100 ms.

Budgets: cold <= 60 s, after one more job <= 3 s, index <= 1 MB, every load <= 2 s, peak
memory <= 500 MB. Exit status 1 when one is missed. The extra job is deleted at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select

from bench import REPO, compile_tracker
from tracker.models import Job
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store import codec
from tracker.store.catalog import delete_job
from tracker.store.points import INSERT_SQLITE, chunk_rows
from tracker.store.schema import open_database
from tracker.store.transactions import write_session

CHROMIUM = Path("/usr/bin/chromium")
TEMPLATES = 8
EXTRA = "extra"
START = datetime(2026, 1, 1, tzinfo=UTC)
BUDGETS = {"cold": 60.0, "incremental": 3.0, "index": 1e6, "load": 2.0, "memory": 500e6}


def build(path: Path, jobs: int, steps: int, work: Path) -> None:
    """The benchmark database at ``path`` (see the module's docstring)."""
    url = f"sqlite:///{path}"
    engine = open_database(url)
    for i in range(TEMPLATES):
        job = write_sample_job(
            work / f"t{i}", seed=i, steps=steps, flash_state_shift=0.5 if i == 5 else 0.0
        )
        meta = {"time": f"{START + timedelta(hours=i):%Y-%m-%dT%H:%M:%SZ}", "gpu": "A10G"}
        with write_session(engine) as session, session.begin():
            print(" ", ingest_job(session, job, name=f"job{i + 1:04d}", meta=meta).outcome_line())
        shutil.rmtree(job)
    engine.dispose()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    templates = [row[0] for row in db.execute("SELECT id FROM job ORDER BY id")]
    for n in range(TEMPLATES + 1, jobs + 1):
        template = templates[n % TEMPLATES]
        loss_shift = 0.002 * ((n * 37) % 11) - 0.01
        bpp_shift = 1e-3 * (n % 7)
        digest = hashlib.sha256(f"clone {n}".encode()).hexdigest()
        job = db.execute(
            "INSERT INTO job (name, source_path, ingested_at, content_digest) "
            "SELECT ?, source_path, ingested_at, ? FROM job WHERE id = ?",
            (f"job{n:04d}", digest, template),
        ).lastrowid
        when = START + timedelta(hours=n - 1)
        db.execute(
            "INSERT INTO job_meta (job_id, key, value) VALUES (?, 'time', ?), (?, 'gpu', ?)",
            (job, f"{when:%Y-%m-%dT%H:%M:%SZ}", job, ("A10G", "L4", "H100")[n % 3]),
        )
        db.execute(
            "INSERT INTO probe (job_id, model, variant, n_params, bpp_params, bpp_state, "
            "bpp_grads, bpp_params_state_grads, peak_steady, error, extra) "
            "SELECT ?, model, variant, n_params, bpp_params, bpp_state + ?, bpp_grads, "
            "bpp_params_state_grads + ?, peak_steady, error, extra FROM probe "
            "WHERE job_id = ? ORDER BY id",
            (job, bpp_shift, bpp_shift, template),
        )
        for (old_run,) in db.execute(
            "SELECT id FROM run WHERE job_id = ? ORDER BY id", (template,)
        ).fetchall():
            run = db.execute(
                "INSERT INTO run (job_id, arm, model, variant, seed, val_loss, final_loss, "
                "diverged, extra) SELECT ?, arm, model, variant, seed, val_loss, final_loss, "
                "diverged, extra FROM run WHERE id = ?",
                (job, old_run),
            ).lastrowid
            old_curve = db.execute(
                "SELECT id FROM curve WHERE run_id = ? AND metric = 'loss'", (old_run,)
            ).fetchone()[0]
            curve = db.execute(
                "INSERT INTO curve (run_id, metric, n_points, first_step, last_step, "
                "first_value, last_value, min_value, max_value, n_nonfinite) SELECT ?, metric, "
                "n_points, first_step, last_step, first_value + ?, last_value + ?, "
                "min_value + ?, max_value + ?, n_nonfinite FROM curve WHERE id = ?",
                (run, *[loss_shift] * 4, old_curve),
            ).lastrowid
            stored = db.execute(
                "SELECT data FROM curve_chunk WHERE curve_id = ? ORDER BY first_step",
                (old_curve,),
            ).fetchall()
            for (data,) in stored:  # the template's points, shifted, as the tracker stores them
                steps, values = codec.decode(data)
                rows = chunk_rows(steps, values + loss_shift)
                db.executemany(INSERT_SQLITE, ((curve, *row) for row in rows))
        for table in ("job_verdicts", "job_number", "job_summary"):
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")][1:]
            listed = ", ".join(f'"{column}"' for column in columns)
            db.execute(
                f"INSERT INTO {table} (job_id, {listed}) SELECT ?, {listed} FROM {table} "
                "WHERE job_id = ?",
                (job, template),
            )
        if n % 100 == 0:
            print(f"  {n} jobs")
    db.execute("COMMIT")
    db.close()


def pss(pid: int) -> int:
    """Proportional set size of a process and all its descendants, in bytes."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1]) * 1024
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return total
    return total + sum(pss(int(child)) for child in children)


def timed_report(url: str, out: Path) -> tuple[float, int, str]:
    """Wall time, peak memory (PSS of the process tree) and output of ``tracker report``."""
    command = [sys.executable, "-m", "tracker", "--db", url, "report", "--out", str(out)]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    peak = 0

    def sample() -> None:
        nonlocal peak
        while process.poll() is None:
            peak = max(peak, pss(process.pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample)
    sampler.start()
    output, _ = process.communicate()
    elapsed = time.perf_counter() - start
    sampler.join()
    if process.returncode != 0:
        raise SystemExit(f"tracker report failed ({process.returncode})")
    return elapsed, peak, output


DRAWN = (
    "() => [...document.querySelectorAll('div.plot[data-figure]')]"
    ".every(div => div.querySelector('.main-svg'))"
)


def load_times(pages: list[Path]) -> list[tuple[Path, float, float]]:
    """Seconds from navigation start to the end of the load event, and to every figure
    drawn (the figures are drawn after the load event), per page."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
    times = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=args)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith(("file:", "data:", "blob:"))
                else route.abort()
            ),
        )
        page = context.new_page()
        # one page first, not counted: the browser's own start and first parse of plotly.js
        page.goto(pages[-1].as_uri(), wait_until="load")
        for path in pages:
            page.goto(path.as_uri(), wait_until="load")
            ms = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
            page.wait_for_function(DRAWN, polling="raf")
            drawn = page.evaluate("performance.now()")
            times.append((path, ms / 1000, drawn / 1000))
        browser.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "tracker-bench")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    path = args.cache / f"report-scale-{args.jobs}x{args.steps}.db"
    url = f"sqlite:///{path}"
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp_name:
        tmp = Path(tmp_name)
        if not path.exists():
            start = time.perf_counter()
            print(f"building {path} ...")
            build(path, args.jobs, args.steps, tmp)
            print(f"built in {time.perf_counter() - start:.0f} s")
        engine = open_database(url)
        with write_session(engine) as session, session.begin():
            if session.scalar(select(Job.id).where(Job.name == EXTRA)) is not None:
                delete_job(session, EXTRA)  # left by an interrupted run

        out = tmp / "report"
        compile_tracker()
        cold, cold_memory, output = timed_report(url, out)
        print(
            f"cold report of {args.jobs} jobs: {cold:.1f} s, peak memory (PSS) "
            f"{cold_memory / 1e6:.0f} MB; {output.splitlines()[0]}"
        )

        extra = write_sample_job(tmp / EXTRA, seed=99, steps=args.steps)
        with write_session(engine) as session, session.begin():
            meta = {"time": "2027-01-01T00:00:00Z", "gpu": "A10G"}
            print(" ", ingest_job(session, extra, meta=meta).outcome_line())
        warm, warm_memory, output = timed_report(url, out)
        print(
            f"after one more job: {warm:.2f} s, peak memory {warm_memory / 1e6:.0f} MB; "
            f"{output.splitlines()[0]}"
        )
        index = (out / "index.html").stat().st_size
        print(f"index.html: {index / 1e6:.2f} MB")

        folders = sorted(p for p in out.iterdir() if p.is_dir())
        chosen = [out / "job0001", out / f"job{args.jobs:04d}", out / EXTRA]
        chosen += random.Random(0).sample(folders, 5)
        pages = [out / "index.html"] + [
            folder / name
            for folder in chosen
            for name in ("index.html", "mem_scaling.html", "gpt_trajectories.html", "table4.html")
        ]
        loads = load_times(pages)
        worst = max(loads, key=lambda item: item[1])
        last_drawn = max(loads, key=lambda item: item[2])
        print(
            f"Chromium load event: index {loads[0][1]:.2f} s; slowest of {len(loads)} pages "
            f"{worst[1]:.2f} s ({worst[0].relative_to(out)})"
        )
        print(
            f"every figure drawn: index {loads[0][2]:.2f} s; slowest of {len(loads)} pages "
            f"{last_drawn[2]:.2f} s ({last_drawn[0].relative_to(out)})"
        )

        with write_session(engine) as session, session.begin():
            delete_job(session, EXTRA)
        engine.dispose()

    results = {
        "cold": cold,
        "incremental": warm,
        "index": index,
        "load": worst[1],
        "memory": max(cold_memory, warm_memory),
    }
    missed = [key for key, value in results.items() if value > BUDGETS[key]]
    for key, value in results.items():
        print(
            f"budget {key}: {value:.3g} <= {BUDGETS[key]:.3g}: "
            f"{'MISSED' if key in missed else 'met'}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
