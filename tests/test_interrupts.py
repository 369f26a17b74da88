"""Ctrl-C (SIGINT) and SIGTERM during ingest, copy and report; a connection lost mid-COPY.

The real command line runs as a child process; the signal is sent at a moment chosen by an
event (a job's line on stdout, a page on disk), never by a clock. The command must exit with
code 130 and one last line naming exactly what the database holds: the jobs stored and those
not. A PostgreSQL backend killed while a COPY is being sent must end in one ``Error:`` line,
without the driver's own log lines before it.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sqlalchemy import create_engine, make_url, select, text
from sqlalchemy.orm import Session

from tracker.errors import Interrupted
from tracker.models import Job
from tracker.sample import write_sample_job
from tracker.store.schema import open_database

JOBS = ("job0", "job1", "job2")
STEPS = 60_000  # 720,000 points a job: the next job is still being read or written
SAFETY_NET_S = 900  # only for a process that hangs: no verdict depends on it
SIGNALS = [signal.SIGINT, signal.SIGTERM]


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tracker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def ingest_all(url: str, directories: list[Path]) -> None:
    """The jobs stored beforehand, uninterrupted."""
    command = [sys.executable, "-m", "tracker", "--db", url, "ingest", *map(str, directories)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=SAFETY_NET_S)
    assert done.returncode == 0, done.stderr


POINTS_OF_JOB = text(
    "SELECT coalesce(sum(curve_chunk.n_points), 0) FROM curve_chunk"
    " JOIN curve ON curve.id = curve_chunk.curve_id "
    "JOIN run ON run.id = curve.run_id JOIN job ON job.id = run.job_id WHERE job.name = :name"
)


def stored_jobs(url: str) -> dict[str, int]:
    """Each stored job's points."""
    engine = open_database(url)
    try:
        with Session(engine) as session:
            names = session.scalars(select(Job.name)).all()
            return {name: session.scalar(POINTS_OF_JOB, {"name": name}) or 0 for name in names}
    finally:
        engine.dispose()


def expected_line(held: list[str], names: tuple[str, ...] = JOBS) -> str:
    stored = [name for name in names if name in held]
    return str(Interrupted.of_jobs(stored, [name for name in names if name not in held]))


def assert_interrupted(process: subprocess.Popen[str], url: str) -> tuple[str, dict[str, int]]:
    """Exit 130 and the last stderr line naming what the database holds; returns both."""
    out, err = process.communicate(timeout=SAFETY_NET_S)
    assert process.returncode == 130, out + err
    assert "Traceback" not in err, err
    held = stored_jobs(url)
    last = err.strip().splitlines()[-1]
    assert last == expected_line(list(held)), err
    return last, held


@pytest.fixture(scope="module")
def job_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("jobs")
    return [write_sample_job(root / name, seed=i, steps=STEPS) for i, name in enumerate(JOBS)]


@pytest.mark.parametrize("signum", SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_a_signal_after_the_first_job_says_it_is_stored_and_the_others_not(
    db_url: str, job_dirs: list[Path], signum: signal.Signals
) -> None:
    process = start("--db", db_url, "ingest", *map(str, job_dirs))
    assert process.stdout is not None
    first = process.stdout.readline()  # the event: job0 is committed
    assert first.startswith("job0: ingested"), first
    process.send_signal(signum)
    last, held = assert_interrupted(process, db_url)
    assert last.startswith("interrupted: job0"), last
    assert "not stored" in last, last  # three jobs of this size: the signal came before the end
    assert all(points == 4 * 3 * STEPS for points in held.values()), held  # whole jobs only


ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # what a terminal is told to draw the bar


def read_screen(screen: int, until: bytes | None = None) -> bytes:
    """What the process wrote to its terminal: up to ``until``, or all of it (until closed)."""
    seen = b""
    while until is None or until not in seen:
        try:
            chunk = os.read(screen, 4096)
        except OSError:  # EIO: the process closed the terminal
            chunk = b""
        if not chunk:
            assert until is None, seen
            return seen
        seen += chunk
    return seen


@pytest.mark.parametrize("signum", SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_a_signal_before_any_job_is_stored_says_none_is(
    db_url: str, job_dirs: list[Path], signum: signal.Signals
) -> None:
    screen, terminal = pty.openpty()  # stderr on a terminal, where the progress bar is drawn
    process = subprocess.Popen(
        [sys.executable, "-m", "tracker", "--db", db_url, "ingest", *map(str, job_dirs)],
        stdout=subprocess.PIPE,
        stderr=terminal,
        text=True,
    )
    os.close(terminal)
    try:
        drawn = read_screen(screen, until=b"ingesting")  # the event: the bar, before job0 is read
        process.send_signal(signum)
        drawn += read_screen(screen)
    finally:
        os.close(screen)
    out, _ = process.communicate(timeout=SAFETY_NET_S)
    text = ESCAPE.sub("", drawn.decode(errors="replace"))
    assert process.returncode == 130, out + text
    assert "Traceback" not in text, text
    held = stored_jobs(db_url)
    last = [line for line in re.split(r"[\r\n]+", text) if line.strip()][-1].strip()
    assert last == expected_line(list(held)), text
    assert "job2" not in held and last.endswith("job2 not stored"), last


LOST_IN_A_CALLBACK = """
import sys, weakref
from tracker.services.interrupts import Tally, keep_lost_interrupt, telling_interrupts
if sys.argv[1] == "kept":
    sys.unraisablehook = keep_lost_interrupt
class Key: pass
def callback(_ref):  # an interrupt that lands in a weakref callback is raised there
    raise KeyboardInterrupt
key = Key()
ref = weakref.ref(key, callback)
try:
    with telling_interrupts(Tally(["job0", "job1", "job2"])) as tally:
        del key  # while job0 is stored: the callback runs, and Python ignores what it raised
        for name in ("job0", "job1", "job2"):
            tally.stored(name)  # the command's next step: the end of job0
    print("went on")
except KeyboardInterrupt as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    ("hook", "then"),
    [("kept", "interrupted: job0 stored; job1, job2 not stored"), ("bare", "went on")],
)
def test_an_interrupt_swallowed_by_a_weakref_callback_is_raised_at_the_next_step(
    hook: str, then: str
) -> None:
    """Python ignores an exception raised in a finalizer or a weakref callback: a Ctrl-C that
    landed there (a collection mid-command) was lost, and the command went on to its end.
    While a command runs it is kept, and raised at the command's next step: the end of the
    job in flight in every storing command (ingest's progress too, inside the job)."""
    done = subprocess.run(
        [sys.executable, "-c", LOST_IN_A_CALLBACK, hook], capture_output=True, text=True
    )
    assert done.stdout == f"{then}\n", done.stderr
    assert ("Exception ignored" in done.stderr) == (hook == "bare"), done.stderr


@pytest.fixture(scope="module")
def copy_source(job_dirs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite history of the three jobs, the source of both backends' copies: a copy only
    reads it, and its reader is interrupted, not killed."""
    source = f"sqlite:///{tmp_path_factory.mktemp('copy_source') / 'source.db'}"
    ingest_all(source, job_dirs)
    return source


def test_a_signal_during_a_copy_names_the_jobs_the_destination_holds(
    db_url: str, copy_source: str
) -> None:
    open_database(db_url).dispose()
    process = start("db", "copy", copy_source, db_url)
    assert process.stdout is not None
    first = process.stdout.readline()  # the event: job0 is in the destination
    assert first.startswith("job0: copied"), first
    process.send_signal(signal.SIGINT)
    last, _held = assert_interrupted(process, db_url)
    assert last.startswith("interrupted: job0") and "not stored" in last, last


def test_a_signal_during_a_report_says_the_index_was_not_updated(
    db_url: str, tmp_path: Path
) -> None:
    root = tmp_path / "jobs"
    dirs = [write_sample_job(root / f"r{i}", seed=i, steps=3000) for i in range(6)]
    ingest_all(db_url, dirs)
    out = tmp_path / "report"
    process = start("--db", db_url, "report", "--out", str(out))
    while not any(out.glob("*/index.html")):  # the event: a first job page is written
        assert process.poll() is None, process.communicate()
        time.sleep(0.01)  # polling for the event; no verdict depends on the time
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=SAFETY_NET_S)
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == (
        f"interrupted: {out / 'index.html'} and its manifest not updated; job pages written "
        "so far are kept and rendered again by the next run"
    )
    assert not (out / "index.html").exists()


def test_a_signal_during_an_export_leaves_whole_files_and_names_them(
    db_url: str, job_dirs: list[Path], tmp_path: Path
) -> None:
    ingest_all(db_url, job_dirs)
    out = tmp_path / "points"
    process = start("--db", db_url, "export", str(out))
    while not any(out.glob("*/curves.parquet")):  # the event: a first job's file is written
        assert process.poll() is None, process.communicate()
        time.sleep(0.01)  # polling for the event; no verdict depends on the time
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=SAFETY_NET_S)
    assert process.returncode == 130, err
    assert "Traceback" not in err, err
    written = sorted(path.parent.name.removeprefix("job=") for path in out.glob("*/curves.parquet"))
    assert written and written != list(JOBS), written  # three jobs: the signal came before the end
    unwritten = JOBS[len(written)]
    assert err.strip().splitlines()[-1] == (
        f"interrupted: written before it: {', '.join(written)}; job {unwritten} and those "
        "after it not written"
    )
    assert [path.name for path in out.rglob("*") if path.is_file()] == ["curves.parquet"] * len(
        written
    )  # no temporary file left
    for name in written:  # each file whole
        assert pl.read_parquet(out / f"job={name}" / "curves.parquet").height == 4 * 3 * STEPS


# -- a PostgreSQL connection lost in the middle of a COPY --------------------------------------

BIG_STEPS = 1_000_000  # ~20 MB of COPY data: more than the socket buffers hold
HOLD_KEY = 0x6832_3161


@pytest.fixture
def copy_blocked(db_url: str) -> Iterator[str]:
    """A trigger on ``curve_chunk`` that waits for an advisory lock this fixture holds: the
    server stops reading the COPY's rows, so the client is caught in the middle of sending.
    Yields the database URL (PostgreSQL only)."""
    if not db_url.startswith("postgresql"):
        pytest.skip("a COPY is PostgreSQL's")
    open_database(db_url).dispose()
    url = make_url(db_url)
    schema = str(url.query["options"]).removeprefix("-csearch_path=")
    admin = create_engine(url.set(query={}), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(
            text(
                f'CREATE FUNCTION "{schema}".hold() RETURNS trigger AS $$ BEGIN '
                f"PERFORM pg_advisory_xact_lock_shared({HOLD_KEY}); RETURN NEW; END $$ "
                "LANGUAGE plpgsql"
            )
        )
        connection.execute(
            text(
                f'CREATE TRIGGER hold BEFORE INSERT ON "{schema}".curve_chunk '
                f'FOR EACH ROW EXECUTE FUNCTION "{schema}".hold()'
            )
        )
    holder = admin.connect()
    holder.execute(text(f"SELECT pg_advisory_lock({HOLD_KEY})"))
    try:
        yield db_url
    finally:
        holder.close()
        admin.dispose()


LOST_IN_A_LIBRARY = r"""
import signal, sys
import tracker.queries.export as export
from tracker.cli import app

def read_by_a_library(*_args, **_kwargs):  # as polars reading a dtype, when Ctrl-C lands there
    try:
        signal.raise_signal(signal.SIGINT)  # the command line's handler raises it here
    except KeyboardInterrupt:
        pass  # dropped: the library raises an error of its own, with no trace of it
    raise TypeError("'<unprintable str object>' is not a Polars data type")

export.job_points = read_by_a_library
app(["--db", sys.argv[1], "export", sys.argv[2]])
"""


def test_an_interrupt_a_library_turns_into_its_own_error_still_ends_the_command(
    tmp_path: Path,
) -> None:
    """A Ctrl-C raised in a library's call back into Python may come out as the library's own
    error, the KeyboardInterrupt gone from its chain (polars' dtype conversion did, in an
    export): the command line noted the signal, so the command still ends as interrupted,
    saying what it wrote."""
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    ingest_all(url, [write_sample_job(tmp_path / "job0", steps=100)])
    done = subprocess.run(
        [sys.executable, "-c", LOST_IN_A_LIBRARY, url, str(tmp_path / "points")],
        capture_output=True,
        text=True,
        timeout=SAFETY_NET_S,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines() == [
        "interrupted: no job was written; job job0 and those after it not written"
    ]


def test_a_connection_lost_mid_copy_ends_in_one_error_line(
    copy_blocked: str, tmp_path: Path
) -> None:
    job = tmp_path / "big"
    job.mkdir()
    steps = np.arange(BIG_STEPS)
    pl.DataFrame({"step": steps, "loss": (5 - steps / BIG_STEPS).round(4)}).write_csv(
        job / "ref_s0.csv"
    )
    (job / "ref_s0.json").write_text("{}")
    app = f"h21a_{uuid.uuid4().hex[:8]}"
    separator = "&" if "?" in copy_blocked else "?"
    url = f"{copy_blocked}{separator}application_name={app}"
    process = start("--db", url, "ingest", str(job))
    admin = create_engine(make_url(copy_blocked).set(query={}), isolation_level="AUTOCOMMIT")
    try:
        killed = False
        while not killed:  # the event: the COPY waits in the trigger for the lock
            assert process.poll() is None, process.communicate()
            with admin.connect() as connection:
                pids = connection.execute(
                    text(
                        "SELECT pid FROM pg_stat_activity WHERE application_name = :app "
                        "AND query LIKE 'COPY%' AND wait_event_type = 'Lock'"
                    ),
                    {"app": app},
                ).scalars()
                for pid in pids:
                    connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
                    killed = True
            time.sleep(0.01)  # polling for the event; no verdict depends on the time
    finally:
        admin.dispose()
    _out, err = process.communicate(timeout=SAFETY_NET_S)
    assert process.returncode == 1, err
    lines = [line for line in err.splitlines() if line != "ingesting"]  # the progress bar
    assert lines == [
        f"Error: {job}: database error: the connection is lost; "
        "nothing of this transaction was written"
    ], err
