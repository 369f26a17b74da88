"""Faults of the SQLite file under the tracker: read-only, full, locked too long, corrupted.

Whatever goes wrong, the command line must end with exit code 1 and exactly one
``Error: ...`` line on stderr (no traceback, no raw driver dump), and nothing stored before
may be lost; the library must raise a ``TrackerError`` with a one-line message. The command
line runs as a real subprocess here, so that what the user would see is what is checked.
"""

from __future__ import annotations

import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sqlalchemy import create_engine, event, func, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from typer.testing import CliRunner

import tracker.store.engine as engine_settings
import tracker.store.transactions as transactions
from tests.conftest import Cli
from tests.stored import stored_points
from tests.templates import copy_sqlite_file
from tracker.cli import app
from tracker.errors import DatabaseBusy, TrackerError
from tracker.models import Curve, CurveChunk, Job, JobMeta, Probe, Run, SourceFile
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.schema import open_database
from tracker.store.transactions import in_write_transaction

SMALL_STEPS = 50
BIG_STEPS = 75_000  # 900,000 points: 1.5 MB of chunks, 9.7 MB of CSV (no progress bar)


# -- helpers -----------------------------------------------------------------------------------


def run_cli(url: str, *args: str, **popen: Any) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tracker", "--db", url, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, **popen)


def assert_one_error_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit code 1 and a single ``Error: ...`` line on stderr; returns that line."""
    assert_no_traceback(result)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def shown_error(result: subprocess.CompletedProcess[str]) -> str:
    """What ends the stderr: after a traceback's box, the exception (first 4 lines)."""
    tail = (
        result.stderr.rsplit("\u2570", 1)[-1].split("\n", 1)[-1]
        if "\u2570" in result.stderr
        else result.stderr
    )
    return "\n".join(tail.strip().splitlines()[:4])


def assert_no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    if "Traceback" in result.stderr:
        pytest.fail(f"a traceback, ending in:\n{shown_error(result)}", pytrace=False)


def state(url: str) -> dict[str, Any]:
    """Row counts, the jobs and a checksum of the points: what a fault must not change."""
    engine = open_database(url)
    try:
        with Session(engine) as session:
            counts = {
                model.__tablename__: session.scalar(select(func.count()).select_from(model))
                for model in (Job, JobMeta, SourceFile, Probe, Run, Curve, CurveChunk)
            }
            jobs = sorted(
                tuple(row) for row in session.execute(select(Job.name, Job.content_digest))
            )
            points = stored_points(session).filter(pl.col("value").is_not_nan())
            checksum = (points.height, points["step"].sum(), points["value"].min())
            return {"counts": counts, "jobs": jobs, "points": checksum}
    finally:
        engine.dispose()


def integrity(path: Path) -> list[tuple[str]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.DatabaseError as exc:
        return [(str(exc),)]
    finally:
        connection.close()


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The job directories, written once a module: every command only reads them."""
    root = tmp_path_factory.mktemp("jobs")
    return {
        "first": write_sample_job(root / "first", steps=SMALL_STEPS),
        "second": write_sample_job(root / "second", seed=1, steps=SMALL_STEPS),
        "big": write_sample_job(root / "big", seed=2, steps=BIG_STEPS),
    }


@pytest.fixture(scope="module")
def ingested(
    tmp_path_factory: pytest.TempPathFactory, jobs: dict[str, Path]
) -> dict[tuple[str, ...], Path]:
    """Databases holding the jobs named, in that order, ingested once a module by the command
    line (in this process: the faults, not these ingests, are what the tests watch) and copied
    by each test that starts from them: a big job's ingest costs seconds."""
    root = tmp_path_factory.mktemp("ingested")
    first, both = root / "first.db", root / "first_big.db"
    Cli(f"sqlite:///{first}")("ingest", str(jobs["first"]))
    copy_sqlite_file(first, both)
    Cli(f"sqlite:///{both}")("ingest", str(jobs["big"]))
    return {("first",): first, ("first", "big"): both}


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tracker.db"


def copied_in(path: Path, ingested: dict[tuple[str, ...], Path]) -> dict[str, Any]:
    """``path`` made a copy of the database of the first job; returns its state."""
    copy_sqlite_file(ingested[("first",)], path)
    return state(f"sqlite:///{path}")


# -- a read-only database ----------------------------------------------------------------------


def test_read_only_database_refuses_writes_in_one_line_and_still_reads(
    db_path: Path, jobs: dict[str, Path], ingested: dict[tuple[str, ...], Path]
) -> None:
    # Tests run as root, whom chmod does not stop: open the file read-only instead.
    url = f"sqlite:///{db_path}"
    before = copied_in(db_path, ingested)
    read_only = f"sqlite:///file:{db_path}?mode=ro&uri=true"
    engine = create_engine(read_only)  # SQLAlchemy takes the URI form, and it is read-only
    with engine.connect() as connection:
        assert connection.execute(text("SELECT name FROM job")).scalars().all() == ["first"]
        with pytest.raises(OperationalError, match="readonly"):
            connection.execute(text("DELETE FROM job"))
    engine.dispose()

    assert_one_error_line(run_cli(read_only, "ingest", str(jobs["second"])), "readonly")
    assert_one_error_line(run_cli(read_only, "delete", "first", "--yes"), "readonly")

    listed = run_cli(read_only, "jobs", "--format", "csv")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[1].startswith("first,")
    runs = run_cli(read_only, "query", "runs", "--format", "csv")
    assert runs.returncode == 0, runs.stderr
    assert len(runs.stdout.splitlines()) == 1 + 4
    assert state(url) == before
    queried = run_cli(
        read_only, "sql", "SELECT sum(n_points) AS n FROM curve_chunk", "--format", "csv"
    )
    assert_no_traceback(queried)
    assert (queried.returncode, queried.stdout) == (0, f"n\n{4 * 3 * SMALL_STEPS}\n")


# -- a full disk -------------------------------------------------------------------------------


@pytest.fixture
def tiny_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs; skipped where mounting is not allowed (needs root or CAP_SYS_ADMIN)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a 1 MB filesystem to fill up")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        reason = mounted.stderr.strip() or f"exit code {mounted.returncode}"
        pytest.skip(f"cannot mount a 1 MB tmpfs to fill up ({reason}); needs CAP_SYS_ADMIN")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def test_full_filesystem_fails_the_ingest_in_one_line_and_loses_nothing(
    tiny_filesystem: Path, jobs: dict[str, Path], ingested: dict[tuple[str, ...], Path]
) -> None:
    path = tiny_filesystem / "tracker.db"
    url = f"sqlite:///{path}"
    before = copied_in(path, ingested)
    failed = run_cli(url, "ingest", str(jobs["big"]))
    assert integrity(path) == [("ok",)]
    assert state(url) == before
    listed = run_cli(url, "jobs", "--format", "csv")
    assert listed.returncode == 0, listed.stderr
    again = run_cli(url, "ingest", str(jobs["second"]))  # the space of the failed write is reused
    assert again.returncode == 0, again.stderr
    assert state(url)["counts"]["job"] == 2
    assert_one_error_line(failed, "full")


def test_file_size_limit_fails_the_ingest_in_one_line_and_loses_nothing(
    db_path: Path, jobs: dict[str, Path], ingested: dict[tuple[str, ...], Path]
) -> None:
    # A full disk without mount privileges: the process may not grow any file past a limit
    # (RLIMIT_FSIZE; Python ignores SIGXFSZ, so writes fail with EFBIG instead).
    url = f"sqlite:///{db_path}"
    before = copied_in(db_path, ingested)
    limit = db_path.stat().st_size + 256 * 1024

    def cap_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    capped = run_cli(url, "ingest", str(jobs["big"]), preexec_fn=cap_file_size)
    assert integrity(db_path) == [("ok",)]
    assert state(url) == before
    Cli(url)("ingest", str(jobs["big"]))  # the same ingest, uncapped, in this process
    assert_one_error_line(capped)


def test_library_full_database_raises_a_tracker_error_and_keeps_earlier_jobs(
    db_path: Path, jobs: dict[str, Path], ingested: dict[tuple[str, ...], Path]
) -> None:
    url = f"sqlite:///{db_path}"
    before = copied_in(db_path, ingested)
    engine = open_database(url)
    with engine.connect() as connection:
        limit = connection.exec_driver_sql("PRAGMA page_count").scalar_one() + 16

    @event.listens_for(engine, "connect")
    def cap_pages(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute(f"PRAGMA max_page_count = {limit}")

    engine.dispose()  # new connections, with the cap
    try:
        with pytest.raises(Exception) as raised:
            in_write_transaction(engine, partial(ingest_job, directory=jobs["big"]))
    finally:
        engine.dispose()
    assert integrity(db_path) == [("ok",)]
    assert state(url) == before
    error = raised.value
    assert isinstance(error, TrackerError), f"{type(error).__module__}.{error!r}"
    message = str(error)
    assert message.splitlines() == [message]
    assert "full" in message


# -- locked for too long -----------------------------------------------------------------------

HOLD_WRITE_LOCK = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
connection.execute("ROLLBACK")
"""


@contextmanager
def write_lock_held(path: Path) -> Iterator[None]:
    """Another process holds the database's write lock until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline() == "locked\n"
        yield
    finally:
        holder.stdin.close()
        assert holder.wait(timeout=600) == 0  # a safety net, not a verdict


def waiting_line(url: str) -> str:
    return f"waiting for another writer to finish with {url} ...\n"


def busy_message(url: str, seconds: int) -> str:
    return (
        f"database {url} stayed locked by other writers for {seconds} s; "
        "nothing was written, try again"
    )


def test_library_gives_up_on_a_lock_held_too_long_and_writes_nothing(
    db_path: Path, jobs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        engine_settings, "SQLITE_BUSY_TIMEOUT_MS", 200
    )  # read by each new connection
    url = f"sqlite:///{db_path}"
    engine = open_database(url)
    empty = state(url)
    try:
        with write_lock_held(db_path):
            started = time.monotonic()
            with pytest.raises(DatabaseBusy) as raised:
                ingest = partial(ingest_job, directory=jobs["first"])
                in_write_transaction(engine, ingest, patience_s=1)
            waited = time.monotonic() - started
            assert str(raised.value) == busy_message(url, 1)
            assert waited >= 1  # it kept trying for its whole patience (however slow the machine)
            assert state(url) == empty  # readers are not blocked, and nothing was written
        result = in_write_transaction(engine, partial(ingest_job, directory=jobs["first"]))
    finally:
        engine.dispose()
    assert result.status == "ingested"
    assert state(url)["counts"]["job"] == 1


def test_cli_gives_up_on_a_lock_held_too_long_in_one_line(
    db_path: Path, jobs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No option or environment variable sets the patience (900 s): patch it in-process.
    url = f"sqlite:///{db_path}"
    open_database(url).dispose()
    runner = CliRunner()
    with monkeypatch.context() as patch:
        patch.setattr(engine_settings, "SQLITE_BUSY_TIMEOUT_MS", 200)
        patch.setattr(
            transactions, "in_write_transaction", partial(in_write_transaction, patience_s=1)
        )
        with write_lock_held(db_path):
            result = runner.invoke(app, ["--db", url, "ingest", str(jobs["first"])])
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1
    assert result.stderr == f"{waiting_line(url)}Error: {jobs['first']}: {busy_message(url, 1)}\n"
    assert state(url)["counts"]["job"] == 0
    done = runner.invoke(app, ["--db", url, "ingest", str(jobs["first"])])
    assert done.exit_code == 0, done.output
    assert state(url)["counts"]["job"] == 1


def test_cli_waits_for_a_lock_held_briefly_then_ingests(
    db_path: Path, jobs: dict[str, Path]
) -> None:
    url = f"sqlite:///{db_path}"
    open_database(url).dispose()
    command = [sys.executable, "-m", "tracker", "--db", url, "ingest", str(jobs["first"])]
    with write_lock_held(db_path):
        waiting = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert waiting.stderr is not None
        # The event, not a clock: the ingest has met the lock and said that it waits.
        told = waiting.stderr.readline()
        assert told == waiting_line(url), told + waiting.stderr.read()
        assert waiting.poll() is None, "the ingest gave up instead of waiting for the lock"
        assert state(url)["counts"]["job"] == 0
    out, err = waiting.communicate(timeout=600)  # a safety net: the lock is released
    assert (waiting.returncode, err) == (0, "")
    assert out.startswith("first: ingested 25 probes")


# -- a corrupted file --------------------------------------------------------------------------


def test_corrupted_pages_end_every_command_in_one_line(
    db_path: Path, jobs: dict[str, Path], ingested: dict[tuple[str, ...], Path]
) -> None:
    url = f"sqlite:///{db_path}"
    copy_sqlite_file(ingested["first", "big"], db_path)
    assert not Path(f"{db_path}-wal").exists()  # everything is in the main file
    page = 4096
    pages = db_path.stat().st_size // page
    with db_path.open("r+b") as file:  # scribble over 20 pages of points in the middle
        file.seek(pages * 6 // 10 * page)
        file.write(random.Random(0).randbytes(20 * page))
    assert integrity(db_path) != [("ok",)]
    outcomes, wrong = {}, []
    for args in (
        ("jobs",),
        ("query", "runs"),
        ("query", "curve", "--arm", "ref_s0", "--arm", "ref_s1", "--arm", "flash_s0"),
        ("sql", "SELECT count(*), sum(n_points), sum(length(data)) FROM curve_chunk"),
        ("ingest", str(jobs["second"])),  # a job it does not hold: a write
        ("delete", "big", "--yes"),
    ):
        result = run_cli(url, *args)
        outcomes[args[0]] = result.returncode
        lines = result.stderr.splitlines()
        one_line = len(lines) == 1 and lines[0].startswith("Error: ") and "malformed" in lines[0]
        if result.returncode not in (0, 1) or (result.returncode == 1 and not one_line):
            wrong.append(
                f"tracker {' '.join(args[:2])}: exit {result.returncode}, {shown_error(result)}"
            )
    assert not wrong, "\n".join(wrong)
    assert outcomes["delete"] == 1  # it must read every point page


# -- export on a full disk -------------------------------------------------------------------


def test_export_past_the_file_size_limit_leaves_no_partial_file_and_names_what_was_written(
    db_path: Path, ingested: dict[tuple[str, ...], Path], tmp_path: Path
) -> None:
    """The big job's file cannot be written (RLIMIT_FSIZE, as above); the small one before it
    is, and is named; no temporary file is left behind."""
    url = f"sqlite:///{db_path}"
    copy_sqlite_file(ingested["first", "big"], db_path)
    out = tmp_path / "points"
    small = run_cli(url, "export", str(out), "--job", "first")
    limit = 256 * 1024  # room for the small job's file and SQLite's own, not the big one's
    assert (out / "job=first" / "curves.parquet").stat().st_size < limit

    def cap_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    assert small.returncode == 0, small.stderr
    capped = run_cli(url, "export", str(out), preexec_fn=cap_file_size)
    line = assert_one_error_line(capped, f"export to {out} failed writing job big (")
    assert line.endswith("); written before it: first, no partial file left")
    assert sorted(p.name for p in out.rglob("*")) == ["curves.parquet", "job=big", "job=first"]
