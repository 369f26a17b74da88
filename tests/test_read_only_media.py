"""A SQLite database on read-only media: every read command and ``serve`` work, writes are
one ``Error:`` line. SQLite's WAL reader needs a ``-shm`` file beside the database; where it
can be neither opened nor created, the tracker opens the file immutable.

The media is a real read-only filesystem: a tmpfs remounted read-only (as root, where a
directory's permissions do not stop anyone); without root a directory of mode 0555 is
already read-only for the process. Skipped with a reason where neither can be had.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.conftest import Cli
from tracker.sample import write_sample_job
from tracker.server import create_app
from tracker.store.schema import HEAD

SAFETY_S = 300  # only a net under a hang; no verdict depends on it


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


@contextmanager
def mountable(directory: Path) -> Iterator[Path]:
    """``directory``, created, to fill and then make read-only by ``make_read_only``."""
    directory.mkdir()
    if os.geteuid() != 0:
        yield directory
        directory.chmod(0o755)
        return
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a read-only filesystem as root")
    mounted = _mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(directory))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to make read-only ({mounted.stderr.strip()})")
    try:
        yield directory
    finally:
        if subprocess.run(["umount", str(directory)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(directory)], capture_output=True)


@pytest.fixture
def media(tmp_path: Path) -> Iterator[Path]:
    with mountable(tmp_path / "media") as directory:
        yield directory


def make_read_only(directory: Path) -> None:
    if os.geteuid() != 0:
        directory.chmod(0o555)
    else:
        remounted = _mount("-o", "remount,ro", str(directory))
        assert remounted.returncode == 0, remounted.stderr
    with pytest.raises(OSError):  # really read-only now
        (directory / "probe").touch()


@pytest.fixture(scope="module")
def on_media(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    """One job ingested into a database on the media (closed cleanly: no -wal, no -shm), made
    read-only: once for the module, as no test can change it."""
    root = tmp_path_factory.mktemp("read_only")
    with mountable(root / "media") as media:
        url = f"sqlite:///{media / 'tracker.db'}"
        job = write_sample_job(root / "job1", steps=40)
        ingest(url, str(job), "--meta", "gpu=A10G")
        assert sorted(p.name for p in media.iterdir()) == ["tracker.db"]
        make_read_only(media)
        yield Cli(url)


def ingest(url: str, *args: str) -> None:
    """In a process of its own, whose end closes the database: SQLite then merges and
    removes the -wal and the -shm."""
    command = [sys.executable, "-m", "tracker", "--db", url, "ingest", *args]
    subprocess.run(command, check=True, capture_output=True, timeout=SAFETY_S)


READS = [
    (("jobs", "--format", "json"), '"job": "job1"'),
    (("show", "job1", "--format", "json"), '"arm": "ref_s0"'),
    (("query", "runs", "--format", "csv"), "job1,"),
    (("sql", "SELECT name FROM job", "--format", "csv"), "name\njob1\n"),
    (("claims", "--format", "csv"), "claim,"),
    (("compare", "job1", "job1"), "0 regressions from job1 to job1"),
    (("db", "current"), f"revision {HEAD}, head {HEAD}: up to date"),
]


@pytest.mark.parametrize(("args", "shown"), READS, ids=[args[0] for args, _ in READS])
def test_every_read_command_works_on_read_only_media(
    on_media: Cli, args: tuple[str, ...], shown: str
) -> None:
    assert shown in on_media(*args).stdout


def test_a_report_reads_from_read_only_media(on_media: Cli, tmp_path: Path) -> None:
    result = on_media("report", "--out", str(tmp_path / "report"))
    assert result.stdout.endswith(f"report: {tmp_path / 'report' / 'index.html'}\n")
    assert (tmp_path / "report" / "job1" / "index.html").is_file()


def test_a_write_on_read_only_media_is_one_line(on_media: Cli) -> None:
    result = on_media("delete", "job1", "--yes", ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: database error: attempt to write a readonly database; "
        "nothing of this transaction was written\n"
    )
    assert json.loads(on_media("jobs", "--format", "json").stdout)[0]["job"] == "job1"


def test_serve_reads_from_read_only_media(on_media: Cli) -> None:
    app = create_app(on_media.url)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert [row["job"] for row in client.get("/api/jobs").json()] == ["job1"]
        assert client.get("/jobs/job1/").status_code == 200
        curve = client.get("/api/curve", params={"job": "job1", "arm": "ref_s0"}).json()
        assert curve["total"] == 40


def test_a_write_ahead_log_that_cannot_be_read_is_refused_in_one_line(
    media: Path, tmp_path: Path
) -> None:
    """A copy taken with its -wal still holding changes (a live database copied): an
    immutable reader would miss them, so the tracker refuses instead of showing less."""
    source = tmp_path / "live.db"
    ingest(f"sqlite:///{source}", str(write_sample_job(tmp_path / "job1", steps=40)))
    with closing(sqlite3.connect(source)) as live:
        live.execute("PRAGMA wal_autocheckpoint = 0")
        live.execute("UPDATE job SET source_path = 'moved'")
        live.commit()
        for suffix in ("", "-wal"):  # the database and its log, as a file copy sees them
            shutil.copyfile(f"{source}{suffix}", media / f"tracker.db{suffix}")
        assert (media / "tracker.db-wal").stat().st_size > 0
    make_read_only(media)
    result = Cli(f"sqlite:///{media / 'tracker.db'}")("jobs", ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: cannot use database sqlite:///{media / 'tracker.db'}: its -wal file holds "
        "changes that need a -shm file, which cannot be created here (read-only media?); "
        "open it once where it is writable first\n"
    )
