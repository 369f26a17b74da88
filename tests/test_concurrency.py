"""Several processes writing to one database at once, on every backend.

Every order in which the processes reach the database is a valid one: a writer that finds
the SQLite lock taken says that it waits (one line on stderr) and goes on afterwards.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session

from tests.stored import stored_points
from tracker.models import Job
from tracker.sample import write_sample_job
from tracker.store.engine import create_tracker_engine
from tracker.store.schema import HEAD, check_schema, open_database, upgrade
from tracker.store.transactions import refresh_statistics

STEPS = 3000


def start_ingest(url: str, directory: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tracker", "--db", url, "ingest", str(directory), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], url: str) -> tuple[int, str, str]:
    """Exit code, stdout, and stderr less the notices of having waited for the write lock."""
    out, err = process.communicate(timeout=900)  # a safety net, not a verdict
    waited = f"waiting for another writer to finish with {url} ..."
    errors = "".join(line for line in err.splitlines(keepends=True) if line.rstrip() != waited)
    return process.returncode, out, errors


def test_eight_processes_ingest_eight_jobs_into_a_fresh_database(
    db_url: str, tmp_path: Path
) -> None:
    # the database is empty: the processes also race to create the schema
    jobs = [write_sample_job(tmp_path / f"job{i}", seed=i, steps=STEPS) for i in range(8)]
    results = [finish(p, db_url) for p in [start_ingest(db_url, job) for job in jobs]]
    for code, out, err in results:
        assert (code, err) == (0, ""), out + err
        assert "ingested 25 probes" in out
    engine: Engine = open_database(db_url)
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 8
        assert stored_points(session).height == 8 * 4 * 3 * STEPS
    engine.dispose()


# SQLite cannot interleave so: a reader's transaction holds its snapshot, and the creator's
# commit waits for it to end
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_schema_committed_between_two_looks_at_it_is_seen_whole(db_url: str) -> None:
    """One process creates the schema of an empty database while another checks it; the
    creator's commit lands right after the checker's first look, which must not take the
    tables it then sees for a foreign database (each PostgreSQL statement sees the commits
    made before it). The interleaving is forced by events, not by timing."""
    creator, checker = create_tracker_engine(db_url), create_tracker_engine(db_url)
    checker.connect().close()  # the dialect's own first queries, out of the way
    migrated, looked, committed = threading.Event(), threading.Event(), threading.Event()

    @event.listens_for(creator, "commit")
    def before_commit(connection: Any) -> None:
        migrated.set()
        assert looked.wait(600)  # safety net, not a verdict

    @event.listens_for(checker, "after_cursor_execute")
    def after_first_look(*args: Any) -> None:
        if not looked.is_set():
            looked.set()
            assert committed.wait(600)

    def create() -> None:
        try:
            upgrade(creator)
        finally:
            committed.set()

    thread = threading.Thread(target=create)
    thread.start()
    try:
        assert migrated.wait(600)
        assert check_schema(checker) == HEAD
    finally:
        looked.set()
        thread.join()
        creator.dispose()
        checker.dispose()


def test_two_processes_racing_for_one_job_name_one_wins(db_url: str, tmp_path: Path) -> None:
    open_database(db_url).dispose()
    first = write_sample_job(tmp_path / "a", seed=1, steps=STEPS)
    second = write_sample_job(tmp_path / "b", seed=2, steps=STEPS)
    racers = [start_ingest(db_url, d, "--job", "contested") for d in (first, second)]
    results = sorted(finish(p, db_url) for p in racers)
    assert [code for code, _, _ in results] == [0, 1]
    assert results[0][1].startswith("contested: ingested 25 probes")
    refusal = "job 'contested' already exists with different content; use --replace to swap it"
    assert results[1][2] in {f"Error: {loser}: {refusal}\n" for loser in (first, second)}
    engine = open_database(db_url)
    with Session(engine) as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 1
        assert stored_points(session).height == 4 * 3 * STEPS
    engine.dispose()


def test_the_statistics_refresh_queues_for_the_write_lock_as_a_write_does(engine: Engine) -> None:
    # in a deferred transaction, SQLite fails a read turned write at once when another writer
    # committed in between; a transaction that takes the lock at BEGIN waits its turn instead
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    refresh_statistics(engine)
    analyse = next(
        i for i, s in enumerate(statements) if s.startswith(("ANALYZE", "PRAGMA optimize"))
    )
    begin = {"sqlite": "BEGIN IMMEDIATE"}.get(engine.dialect.name)
    assert begin is None or begin in statements[:analyse]
