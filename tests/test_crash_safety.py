"""SIGKILL in the middle of a write leaves whole jobs or nothing, on every backend.

Each test starts the real command line as a subprocess on a large job, kills it with SIGKILL
at several moments, and checks the database after every kill: it opens, SQLite's
``PRAGMA integrity_check`` passes, and the job is either untouched (absent, or for
``--replace`` the old version exactly) or whole -- never partly written.

No moment is a fixed clock time, so that the tests hold on a machine of any speed. Each test
first runs the command once uninterrupted and measures how long its write transaction lasts
on the machine at hand; the kills then come right after the start, and at 0, 25, 50 and 75 %
of that duration after the process's write transaction is first seen (SQLite's write lock is
held: ``BEGIN IMMEDIATE`` from here fails at once; PostgreSQL shows a transaction id for the
process's ``application_name``). A kill that comes after the commit (the machine sped up) is
a valid outcome with its own check: the new data must then be complete and exact. Kills at
the moment the write is seen are added until enough of them have landed inside the write.
Run with ``-s`` to see where each kill landed.
"""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sqlalchemy import create_engine, make_url, select, text
from sqlalchemy.orm import Session

from tests.stored import row_counts, stored_points
from tracker.models import Curve, CurveChunk, Job, JobMeta, Probe, Run, SourceFile
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.catalog import as_utc, delete_job
from tracker.store.points import CHUNK_POINTS
from tracker.store.schema import open_database
from tracker.store.transactions import in_write_transaction

TABLES = (Job, JobMeta, SourceFile, Probe, Run, Curve, CurveChunk)
ARMS = 4
METRICS = 3  # loss, lr, step_ms per sample arm
SAFETY_NET_S = 900  # only for a process that hangs: no verdict depends on it


@dataclass(frozen=True)
class Moment:
    label: str
    # When to kill, as a fraction of an uninterrupted write's duration after the write is
    # first seen; None: right after the process starts (it is still importing).
    into_write: float | None


MOMENTS = (
    Moment("start", None),
    Moment("write+0%", 0.0),
    Moment("write+25%", 0.25),
    Moment("write+50%", 0.5),
    Moment("write+75%", 0.75),
)
MIN_KILLS_IN_WRITE = 3
EXTRA_KILLS = 6  # more kills the moment the write is seen, until enough landed inside it


@dataclass
class Kill:
    moment: str
    since_start: float  # when the kill came, seconds after the process started
    since_write: float | None  # ... and after its write was first seen (None: never seen)
    in_write: bool  # the process held its write transaction right before the kill
    finished: int | None  # the exit code, when the process ended before the kill
    stdout: str
    outcome: str = ""
    interrupted: bool = False  # the database shows the command's work cut short

    @property
    def inside(self) -> bool:
        """Landed inside the write: seen writing just before, and nothing of it committed."""
        return self.in_write and self.interrupted

    def line(self) -> str:
        write = "-" if self.since_write is None else f"{self.since_write:5.2f}s"
        where = "inside the write" if self.inside else "outside the write"
        if self.finished is not None:
            where = f"after the process ended (exit {self.finished})"
        return (
            f"  {self.moment:<10} at {self.since_start:5.2f}s (write {write}): "
            f"{where}; afterwards: {self.outcome}"
        )


# -- watching the writer ---------------------------------------------------------------------


class WriteProbe:
    """Tells whether a process holds a write transaction on the database at ``url``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.app = f"crash_{uuid.uuid4().hex[:12]}"
        parsed = make_url(url)
        self.sqlite = parsed.get_backend_name() == "sqlite"
        if self.sqlite:
            assert parsed.database
            self.path = parsed.database
        else:
            self.engine = create_engine(url, isolation_level="AUTOCOMMIT")

    def url_for_process(self) -> str:
        """``url`` naming the process, so that its PostgreSQL sessions can be found."""
        if self.sqlite:
            return self.url
        separator = "&" if "?" in self.url else "?"
        return f"{self.url}{separator}application_name={self.app}"

    def writing(self) -> bool:
        if self.sqlite:
            connection = sqlite3.connect(self.path, timeout=0, isolation_level=None)
            try:
                connection.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if "locked" in str(exc) or "busy" in str(exc):
                    return True
                raise
            finally:
                connection.close()  # rolls back our empty transaction, if it began
            return False
        return self._sessions(" AND backend_xid IS NOT NULL") > 0

    def _sessions(self, condition: str = "") -> int:
        with self.engine.connect() as connection:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = :app"
            return connection.execute(text(query + condition), {"app": self.app}).scalar_one()

    def wait_for_server_cleanup(self) -> None:
        """PostgreSQL notices the dead client and rolls its transaction back."""
        if self.sqlite:
            return
        deadline = time.monotonic() + SAFETY_NET_S
        while self._sessions() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self._sessions() == 0, "the killed client's session is still on the server"

    def close(self) -> None:
        if not self.sqlite:
            self.engine.dispose()


@contextmanager
def write_probe(url: str) -> Iterator[WriteProbe]:
    probe = WriteProbe(url)
    try:
        yield probe
    finally:
        probe.close()


def tracker(*args: str) -> list[str]:
    return [sys.executable, "-m", "tracker", *args]


def run_tracker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(tracker(*args), capture_output=True, text=True, timeout=SAFETY_NET_S)


def start(command: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # stdout tells what was committed
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def wait_for_write(process: subprocess.Popen[str], probe: WriteProbe) -> float | None:
    """When the process's write transaction is first seen; None if it ended unseen."""
    while process.poll() is None:
        if probe.writing():
            return time.monotonic()
        time.sleep(0.005)
    return None


def measure_write(command: list[str], probe: WriteProbe) -> float:
    """Seconds from an uninterrupted run's write first seen to its write last seen, on this
    machine: not to the process's end, whose exit after the commit would put the later
    moments past the write, where they prove less and more kills must follow."""
    process = start(command)
    write_seen = wait_for_write(process, probe)
    last_seen = write_seen
    while process.poll() is None:
        if probe.writing():
            last_seen = time.monotonic()
        time.sleep(0.005)
    stdout, stderr = process.communicate(timeout=SAFETY_NET_S)
    assert process.returncode == 0, stdout + stderr
    assert write_seen is not None and last_seen is not None, "the write was never seen"
    return last_seen - write_seen


def start_and_kill(command: list[str], probe: WriteProbe, moment: Moment, write_s: float) -> Kill:
    process = start(command)
    started = time.monotonic()
    write_seen: float | None = None
    try:
        if moment.into_write is not None:
            write_seen = wait_for_write(process, probe)
            wait_s = moment.into_write * write_s
            while (
                write_seen is not None
                and process.poll() is None
                and time.monotonic() - write_seen < wait_s
            ):
                time.sleep(0.005)
        in_write = process.poll() is None and probe.writing()
        finished = process.poll()
        killed_at = time.monotonic()
        if finished is None:
            process.send_signal(signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        stdout, _ = process.communicate(timeout=SAFETY_NET_S)
    probe.wait_for_server_cleanup()
    return Kill(
        moment=moment.label,
        since_start=killed_at - started,
        since_write=None if write_seen is None else killed_at - write_seen,
        in_write=in_write,
        finished=finished,
        stdout=stdout,
    )


# -- what the database holds -----------------------------------------------------------------


def assert_sqlite_intact(url: str) -> None:
    """Run before anything else opens the file after a kill: this opening recovers it."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return
    assert parsed.database
    connection = sqlite3.connect(parsed.database)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        connection.close()


def table_counts(session: Session) -> dict[str, int]:
    return row_counts(session, TABLES)


def checksum(points: pl.DataFrame) -> tuple[Any, ...]:
    """count, non-NaN count, +inf count, -inf count, sum of finite values, sum of steps."""
    value = points["value"]
    finite = value.filter(value.is_finite())
    return (
        points.height,
        int((~value.is_nan()).sum()),
        int((value == math.inf).sum()),
        int((value == -math.inf).sum()),
        float(finite.sum()) if finite.len() else None,
        int(points["step"].sum()),
    )


def same(a: Any, b: Any) -> bool:
    """Equal, but sums of floats only to 12 digits: the backends may add in any order."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    return bool(a == b)


def job_fingerprints(session: Session) -> dict[str, dict[str, Any]]:
    """Per job: its row, how many rows of each kind it owns, a checksum of its points."""
    jobs = {
        job.name: {
            "digest": job.content_digest,
            "ingested_at": as_utc(job.ingested_at),
            "meta": sorted((m.key, m.value) for m in job.meta),
            "files": sorted((f.path, f.sha256, f.size) for f in job.files),
            "probes": len(job.probes),
            "runs": len(job.runs),
            "curves": sum(len(run.curves) for run in job.runs),
            "points": (0, 0, 0, 0, None, 0),
        }
        for job in session.scalars(select(Job))
    }
    for (name,), points in stored_points(session).partition_by("job", as_dict=True).items():
        jobs[str(name)]["points"] = checksum(points)
    return jobs


def snapshot(url: str) -> dict[str, Any]:
    """Everything the crash must not change: counts, jobs, a checksum of all points."""
    engine = open_database(url)  # also: the database opens
    try:
        with Session(engine) as session:
            return {
                "tables": table_counts(session),
                "jobs": job_fingerprints(session),
                "points": checksum(stored_points(session)),
            }
    finally:
        engine.dispose()


def expected_tables(steps: int, arms: int = ARMS) -> dict[str, int]:
    return {
        "job": 1,
        "job_meta": 0,
        "source_file": 1 + 2 * arms,
        "probe": 25,
        "run": arms,
        "curve": arms * METRICS,
        "curve_chunk": arms * METRICS * -(-steps // CHUNK_POINTS),
        "point": arms * METRICS * steps,
    }


def kill_repeatedly(
    command: list[str],
    probe: WriteProbe,
    check: Callable[[Kill], None],
    what: str,
    write_s: float,
) -> list[Kill]:
    """Kill at every moment, then at the write's start until enough kills landed inside it.

    ``check`` judges the database after each kill, sets ``outcome`` and ``interrupted``, and
    puts the database back in the state the command starts from.
    """
    kills = []
    extra = (Moment(f"write+0% #{n}", 0.0) for n in range(2, EXTRA_KILLS + 2))
    for moment in (*MOMENTS, *extra):
        if moment not in MOMENTS and sum(k.inside for k in kills) >= MIN_KILLS_IN_WRITE:
            break
        kill = start_and_kill(command, probe, moment, write_s)
        kills.append(kill)
        check(kill)
    report = "\n".join(kill.line() for kill in kills)
    print(f"\n{what} ({make_url(probe.url).get_backend_name()}), write {write_s:.2f}s:\n{report}")
    inside = sum(kill.inside for kill in kills)
    assert inside >= MIN_KILLS_IN_WRITE, f"too few kills landed inside the write:\n{report}"
    return kills


# -- the tests ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jobs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("crash_jobs")


def content(state: dict[str, Any]) -> dict[str, Any]:
    """A snapshot without the ingest times, which differ between two runs of one command."""
    jobs = {
        name: {key: value for key, value in job.items() if key != "ingested_at"}
        for name, job in state["jobs"].items()
    }
    return {**state, "jobs": jobs}


def test_killed_ingest_leaves_no_trace_and_the_next_ingest_completes(
    db_url: str, jobs_root: Path
) -> None:
    steps = 40_000
    job = jobs_root / "ingest" / "big"
    if not job.exists():
        write_sample_job(job, steps=steps)
    open_database(db_url).dispose()  # the schema exists: the kills hit the ingest itself
    empty = snapshot(db_url)

    def undo() -> None:
        engine = open_database(db_url)
        in_write_transaction(engine, partial(delete_job, name="big"))
        engine.dispose()

    with write_probe(db_url) as probe:
        command = tracker("--db", probe.url_for_process(), "ingest", str(job))
        write_s = measure_write(command, probe)
        whole = content(snapshot(db_url))
        assert whole["tables"] == expected_tables(steps)
        undo()

        def check(kill: Kill) -> None:
            assert_sqlite_intact(db_url)
            after = snapshot(db_url)
            if same(after, empty):
                kill.outcome, kill.interrupted = "no trace of the job", True
                assert "ingested" not in kill.stdout, "reported ingested, but nothing was stored"
                return
            assert same(content(after), whole), f"partly written: {after['tables']}"
            kill.outcome = "the whole job (the kill came after the commit)"
            undo()

        kill_repeatedly(command, probe, check, "SIGKILL during `tracker ingest`", write_s)

    done = run_tracker("--db", db_url, "ingest", str(job))
    assert done.returncode == 0, done.stderr
    points = ARMS * METRICS * steps
    assert done.stdout == f"big: ingested 25 probes (1 failed), 4 arms, {points} points\n"
    assert_sqlite_intact(db_url)
    assert same(content(snapshot(db_url)), whole)


def test_killed_replace_keeps_the_old_job_exactly_and_the_next_replace_completes(
    db_url: str, jobs_root: Path
) -> None:
    old_steps, new_steps = 12_000, 30_000
    old = jobs_root / "replace_old" / "big"
    new = jobs_root / "replace_new" / "big"
    if not old.exists():
        write_sample_job(old, seed=1, steps=old_steps)
        write_sample_job(new, seed=2, steps=new_steps)

    def put_back_the_old_job() -> dict[str, Any]:
        engine = open_database(db_url)
        ingest = partial(ingest_job, directory=old, meta={"version": "old"}, replace=True)
        in_write_transaction(engine, ingest)
        engine.dispose()
        return snapshot(db_url)

    before = put_back_the_old_job()
    assert before["tables"] == {**expected_tables(old_steps), "job_meta": 1}

    with write_probe(db_url) as probe:
        command = tracker("--db", probe.url_for_process(), "ingest", str(new), "--replace")
        write_s = measure_write(command, probe)
        replaced = content(snapshot(db_url))
        # no old point left behind; the metadata is kept, as --replace does
        assert replaced["tables"] == {**expected_tables(new_steps), "job_meta": 1}
        before = put_back_the_old_job()

        def check(kill: Kill) -> None:
            nonlocal before
            assert_sqlite_intact(db_url)
            after = snapshot(db_url)
            if same(after, before):
                kill.outcome, kill.interrupted = "the old job exactly intact", True
                assert "replaced" not in kill.stdout, kill.stdout
                return
            assert same(content(after), replaced), f"neither old nor new: {after['tables']}"
            kill.outcome = "the whole new job (the kill came after the commit)"
            before = put_back_the_old_job()

        kill_repeatedly(command, probe, check, "SIGKILL during `tracker ingest --replace`", write_s)

    done = run_tracker("--db", db_url, "ingest", str(new), "--replace")
    assert done.returncode == 0, done.stderr
    points = ARMS * METRICS * new_steps
    assert done.stdout == (
        f"big: replaced 25 probes (1 failed), 4 arms, {points} points; metadata kept: version=old\n"
    )
    assert_sqlite_intact(db_url)
    after = snapshot(db_url)
    assert same(content(after), replaced)
    assert after["jobs"]["big"]["digest"] != before["jobs"]["big"]["digest"]


COPY_JOBS = ("j1", "j2", "j3")
COPY_STEPS = 10_000


@pytest.fixture(scope="module")
def copy_source(jobs_root: Path) -> str:
    """A local SQLite history of a few large jobs."""
    url = f"sqlite:///{jobs_root / 'source.db'}"
    engine = open_database(url)
    for seed, name in enumerate(COPY_JOBS, start=1):
        directory = write_sample_job(jobs_root / "copy" / name, seed=seed, steps=COPY_STEPS)
        meta = {"gpu": "A10G", "n": str(seed)}
        in_write_transaction(engine, partial(ingest_job, directory=directory, meta=meta))
    engine.dispose()
    return url


def test_killed_copy_leaves_only_whole_jobs_and_the_next_copy_completes(
    db_url: str, copy_source: str
) -> None:
    source = snapshot(copy_source)
    assert sorted(source["jobs"]) == sorted(COPY_JOBS)
    open_database(db_url).dispose()

    def empty_the_destination() -> None:
        engine = open_database(db_url)
        for name in COPY_JOBS:
            with Session(engine) as session:
                present = session.scalar(select(Job.id).where(Job.name == name))
            if present is not None:
                in_write_transaction(engine, partial(delete_job, name=name))
        engine.dispose()

    def check(kill: Kill) -> None:
        assert_sqlite_intact(db_url)
        assert_sqlite_intact(copy_source)  # only read, but its reader was killed too
        after = snapshot(db_url)
        for name, fingerprint in after["jobs"].items():
            assert same(fingerprint, source["jobs"][name]), f"job {name} is not whole"
        reported = {line.split(":")[0] for line in kill.stdout.splitlines() if "copied," in line}
        assert reported <= set(after["jobs"]), "reported copied, but not in the destination"
        whole = [source["jobs"][name] for name in after["jobs"]]
        assert after["tables"]["point"] == sum(job["points"][0] for job in whole), "stray points"
        assert after["tables"]["curve"] == sum(job["curves"] for job in whole)
        assert after["tables"]["probe"] == sum(job["probes"] for job in whole)
        kill.outcome = f"whole jobs only: {sorted(after['jobs']) or 'none'}"
        kill.interrupted = len(after["jobs"]) < len(COPY_JOBS)
        empty_the_destination()

    with write_probe(db_url) as probe:
        command = tracker("db", "copy", copy_source, probe.url_for_process())
        write_s = measure_write(command, probe)
        assert same(snapshot(db_url), source)
        empty_the_destination()
        kill_repeatedly(command, probe, check, "SIGKILL during `tracker db copy`", write_s)

    done = run_tracker("db", "copy", copy_source, db_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"{len(COPY_JOBS)} jobs copied"
    assert_sqlite_intact(db_url)
    assert same(snapshot(db_url), source)
