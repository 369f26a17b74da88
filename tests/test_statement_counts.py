"""Every page and command issues as many statements at 9 jobs as at 3: none grows with the
number of jobs (an N+1 costs a round trip a job, seconds at thousands of jobs on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event

from tests.conftest import Cli, client_for
from tracker.queries import job_analysis
from tracker.sample import write_sample_job
from tracker.store import raw_rows

STEPS = 120  # the fewest that a sample job's analysis judges like a real one's
PAGES = ("/", "/runs", "/claims", "/api/runs", "/api/jobs", "/api/claims", "/trend")
COMMANDS = (("jobs",), ("query", "runs"), ("claims",), ("compare", "job-0", "job-1"))


class Statements:
    """Counts the statements every engine of this process sends while it is listening."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, *args: Any) -> None:
        self.count += 1

    def of(self, work: Callable[[], object]) -> int:
        before = self.count
        work()
        return self.count - before


@pytest.fixture
def statements() -> Iterator[Statements]:
    counter = Statements()
    event.listen(Engine, "before_cursor_execute", counter)
    yield counter
    event.remove(Engine, "before_cursor_execute", counter)


def _ingest(cli: Cli, root: Path, numbers: range) -> None:
    for n in numbers:
        directory = write_sample_job(root / f"job-{n}", steps=STEPS, seed=n)
        cli(
            "ingest",
            str(directory),
            "--job",
            f"job-{n}",
            f"--meta=time=2026-10-{n + 1:02d}T00:00:00Z",
        )


def _counts(url: str, cli: Cli, statements: Statements) -> dict[str, int]:
    counts: dict[str, int] = {}
    with client_for(url) as client:  # a new server: each page's first visit, nothing cached
        for page in PAGES:
            counts[page] = statements.of(lambda page=page: _ok(client.get(page)))
    for command in COMMANDS:
        counts[" ".join(command)] = statements.of(lambda command=command: cli(*command))
    return counts


def _ok(response: Any) -> None:
    assert response.status_code == 200, response.text


def test_statements_do_not_grow_with_the_jobs(
    cli: Cli, db_url: str, tmp_path: Path, statements: Statements
) -> None:
    _ingest(cli, tmp_path, range(3))
    few = _counts(db_url, cli, statements)
    _ingest(cli, tmp_path, range(3, 9))
    many = _counts(db_url, cli, statements)
    assert many == few


def test_rows_read_a_few_at_a_time_cost_no_statement_and_show_the_same(
    cli: Cli, db_url: str, tmp_path: Path, statements: Statements, monkeypatch: Any
) -> None:
    """Every job's rows are streamed, a chunk fetched at a time, and the verdicts handed on a
    batch at a time: a row a chunk and a batch send the statements of one chunk and show the
    same, the batches in job id order joined in job order (a job of an earlier time than
    those before it)."""
    _ingest(cli, tmp_path, range(3))
    directory = write_sample_job(tmp_path / "early", steps=STEPS, seed=3)
    cli("ingest", str(directory), "--job", "early", "--meta=time=2026-09-01T00:00:00Z")
    shown = ("/", "/claims", "/api/claims")
    commands = (("claims", "--format", "json"), ("compare", "early", "job-0", "--format", "json"))

    def counted(work: Callable[[], str]) -> tuple[int, str]:
        said: list[str] = []
        return statements.of(lambda: said.append(work())), said[0]

    def read() -> dict[str, tuple[int, str]]:
        with client_for(db_url) as client:
            found = {page: counted(lambda page=page: client.get(page).text) for page in shown}
        for command in commands:
            found[command[0]] = counted(lambda command=command: cli(*command).stdout)
        return found

    whole = read()
    monkeypatch.setattr(raw_rows, "STREAMED_ROWS", 1)
    monkeypatch.setattr(job_analysis, "VERDICT_BATCH_ROWS", 1)
    assert read() == whole


# PostgreSQL only: SQLite's PRAGMA optimize analyses only the tables it finds worth it
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgresql_plans_from_fresh_statistics_after_an_ingest(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    _ingest(cli, tmp_path, range(2))
    with engine.connect() as connection:
        planned = connection.exec_driver_sql(
            "SELECT reltuples FROM pg_class WHERE oid = 'job_verdict'::regclass"
        ).scalar_one()
        stored = connection.exec_driver_sql("SELECT count(*) FROM job_verdict").scalar_one()
    assert planned == stored > 0  # never analysed: -1


class VerdictReads:
    """Counts the statements that read verdict rows (``stored_rows``'s of ``job_verdict``)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *args: Any) -> None:
        if "FROM job_verdict" in statement and "ORDER BY job_verdict.job_id" in statement:
            self.count += 1


def test_the_home_page_reads_every_jobs_verdicts_once(
    cli: Cli, db_url: str, tmp_path: Path
) -> None:
    """Its claims and its comparison's yardstick (every job) share one read; the two latest
    jobs' verdicts, for the comparison itself, are the other."""
    _ingest(cli, tmp_path, range(3))
    reads = VerdictReads()
    event.listen(Engine, "before_cursor_execute", reads)
    try:
        with client_for(db_url) as client:
            _ok(client.get("/"))
    finally:
        event.remove(Engine, "before_cursor_execute", reads)
    assert reads.count == 2
