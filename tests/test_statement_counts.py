"""Every page and command issues as many statements at 9 jobs as at 3: none grows with the
number of jobs (an N+1 costs a round trip a job, seconds at thousands of jobs on PostgreSQL);
and a read of many jobs' rows binds their ids as one parameter, whatever their number.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import asdict, is_dataclass
from functools import partial
from itertools import count
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sqlalchemy import Engine, event, select
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tracker.analysis.expectations import load_expectations
from tracker.conditions import Condition
from tracker.models import Job, JobIndex
from tracker.queries.job_analysis import job_studies
from tracker.queries.selection import JobSelection, contents_and_meta, selected_jobs
from tracker.queries.tables import arm_rows, probes
from tracker.report.files import PLOTLY_JS
from tracker.sample import write_sample_job
from tracker.store import frames, packed_verdicts, raw_rows
from tracker.store.catalog import job_studies as catalog_studies
from tracker.store.curves import arm_points_by_job
from tracker.store.index_rows import stored_counts, stored_grid_curves
from tracker.store.jobdata import probes_by_job
from tracker.store.kept_rows import stored_rows, summaries_by_job
from tracker.store.run_rows import stored_runs, verified_runs_by_job
from tracker.store.runfilter import matching_runs
from tracker.store.schema import open_database
from tracker.store.value_lists import among
from tracker.views.job import job_contents

GENERATED = re.compile(r"generated \S+ by tracker")
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


def _counts(url: str, cli: Cli, statements: Statements, report: Path) -> dict[str, int]:
    """The statements of each page and command; ``report``: a folder for a cold report."""
    counts: dict[str, int] = {}
    with client_for(url) as client:  # a new server: each page's first visit, nothing cached
        for page in PAGES:
            counts[page] = statements.of(lambda page=page: _ok(client.get(page)))
    for command in COMMANDS:
        counts[" ".join(command)] = statements.of(lambda command=command: cli(*command))
    counts["report"] = statements.of(lambda: cli("report", "--out", str(report)))
    return counts


def _cold_report(cli: Cli, out: Path) -> str:
    """A report written into the empty folder ``out``: every file's text, the line saying
    when it was generated left out."""
    cli("report", "--out", str(out))
    return "".join(
        f"{path.relative_to(out)}\n" + GENERATED.sub("", path.read_text())
        for path in sorted(out.rglob("*"))
        if path.is_file() and path.name != PLOTLY_JS
    )


def _ok(response: Any) -> None:
    assert response.status_code == 200, response.text


def test_statements_do_not_grow_with_the_jobs(
    cli: Cli, db_url: str, tmp_path: Path, statements: Statements
) -> None:
    _ingest(cli, tmp_path, range(3))
    few = _counts(db_url, cli, statements, tmp_path / "report-3")
    _ingest(cli, tmp_path, range(3, 9))
    many = _counts(db_url, cli, statements, tmp_path / "report-9")
    assert many == few


def test_rows_read_a_few_at_a_time_cost_no_statement_and_show_the_same(
    cli: Cli, db_url: str, tmp_path: Path, statements: Statements, monkeypatch: Any
) -> None:
    """Every job's rows are streamed, a chunk fetched at a time, and the verdicts handed on a
    batch at a time: a row a chunk and a batch send the statements of one chunk and show the
    same, the batches in job id order joined in job order (a job of an earlier time than
    those before it); a cold report's pages, each job's rows streamed, are the same."""
    _ingest(cli, tmp_path, range(3))
    directory = write_sample_job(tmp_path / "early", steps=STEPS, seed=3)
    cli("ingest", str(directory), "--job", "early", "--meta=time=2026-09-01T00:00:00Z")
    shown = ("/", "/claims", "/api/claims")
    commands = (("claims", "--format", "json"), ("compare", "early", "job-0", "--format", "json"))

    def counted(work: Callable[[], str]) -> tuple[int, str]:
        said: list[str] = []
        return statements.of(lambda: said.append(work())), said[0]

    folders = (tmp_path / f"report-{n}" for n in count())

    def read() -> dict[str, tuple[int, str]]:
        with client_for(db_url) as client:
            found = {page: counted(lambda page=page: client.get(page).text) for page in shown}
        for command in commands:
            found[command[0]] = counted(lambda command=command: cli(*command).stdout)
        found["report"] = counted(lambda: _cold_report(cli, next(folders)))
        return found

    whole = read()
    assert "job-2" in whole["report"][1]
    monkeypatch.setattr(raw_rows, "STREAMED_ROWS", 1)
    monkeypatch.setattr(raw_rows, "STREAMED_BLOBS", 1)
    monkeypatch.setattr(packed_verdicts, "COLUMN_BATCH_ROWS", 1)
    monkeypatch.setattr(packed_verdicts, "FEW_JOBS", 0)  # every key read first, then streamed
    monkeypatch.setattr(frames, "STREAMED_FRAME_ROWS", 1)  # the probes table a row a frame
    assert read() == whole


# PostgreSQL only: SQLite's PRAGMA optimize analyses only the tables it finds worth it
@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_postgresql_plans_from_fresh_statistics_after_an_ingest(
    cli: Cli, db_url: str, engine: Engine, tmp_path: Path
) -> None:
    _ingest(cli, tmp_path, range(2))
    with engine.connect() as connection:
        planned = connection.exec_driver_sql(
            "SELECT reltuples FROM pg_class WHERE oid = 'job_verdicts'::regclass"
        ).scalar_one()
        stored = connection.exec_driver_sql("SELECT count(*) FROM job_verdicts").scalar_one()
    assert planned == stored > 0  # never analysed: -1


class VerdictReads:
    """Counts the statements that read verdict rows (``kept_columns``'s of ``job_verdicts``)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *args: Any) -> None:
        if "FROM job_verdicts" in statement and "ORDER BY job_verdicts.job_id" in statement:
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


# more ids than either driver binds as parameters: psycopg 65,535, SQLite 32,766 as built by
# default (``SQLITE_MAX_VARIABLE_NUMBER``; Debian's allows 250,000: the test sets the default)
PAST_THE_LIMITS = 70_000
SQLITE_VARIABLES = 32_766


def test_a_read_of_more_ids_than_the_drivers_bind_is_one_statement(
    study: Cli, db_url: str, statements: Statements
) -> None:
    """Each read of many jobs' rows gives, for 70,000 ids (of no job, but for the study's), the
    rows of the study's jobs alone, in as many statements: the ids are one parameter."""
    engine = open_database(db_url)
    if engine.dialect.name == "sqlite":
        limit = partial(_limit_variables, SQLITE_VARIABLES)
        event.listen(engine, "checkout", limit)
    with Session(engine) as session:
        real = sorted(session.scalars(select(Job.id)))
        half = PAST_THE_LIMITS // 2  # before and after the real ones
        many = [*range(-half, 0), *real, *range(real[-1] + 1, real[-1] + 1 + half)]
        digest = session.scalars(select(JobIndex.expectations)).first()
        assert digest is not None
        jobs = selected_jobs(session, JobSelection())
        unknown = pl.DataFrame({"job_id": [i for i in many if i not in real]})
        more_jobs = pl.concat([jobs, unknown.with_columns(job=pl.lit("no job"))], how="diagonal")
        where = JobSelection(
            where=(Condition("val_loss", "100", "<"), Condition("notes", "x", "!="))
        )
        reads: dict[str, Callable[[list[int]], object]] = {
            "stored_runs": lambda ids: stored_runs(session, ids),
            "verified_runs_by_job": lambda ids: list(verified_runs_by_job(session, ids)),
            "stored_counts": lambda ids: stored_counts(session, ids, digest),
            "stored_grid_curves": lambda ids: stored_grid_curves(session, ids, digest),
            "stored_rows": lambda ids: stored_rows(session, ids, digest),
            "matching_runs": lambda ids: matching_runs(session, ids, where.where),
            "catalog.job_studies": lambda ids: catalog_studies(session, ids),
            "job_analysis.job_studies": lambda ids: job_studies(session, ids),
            "contents_and_meta": lambda ids: contents_and_meta(session, ids),
            "arm_rows": lambda ids: arm_rows(session, where, ids).rows(),
            "probes": lambda ids: probes(
                session, JobSelection(), jobs=jobs if ids == real else more_jobs
            ).rows(),
            "summaries_by_job": lambda ids: list(summaries_by_job(session, ids, [digest])),
            "probes_by_job": lambda ids: [(j, f.rows()) for j, f in probes_by_job(session, ids)],
            "arm_points_by_job": lambda ids: [
                (j, {arm: (s.tolist(), v.tolist()) for arm, (s, v) in points.items()})
                for j, points in arm_points_by_job(session, ids, at_most=10**9)
            ],
            "job_contents": lambda ids: [
                (c.view.name, c.probes, c.arms, c.stopped)
                for c in job_contents(session, ids, load_expectations())
            ],
        }
        for name, read in reads.items():
            read(real)  # what a read caches (a study's definition) read before either count
            assert _counted(statements, read, many) == _counted(statements, read, real), name
        names = [f"no-job-{i}" for i in range(PAST_THE_LIMITS)] + ["j2"]
        assert list(session.scalars(select(Job.name).where(among(Job.name, names)))) == ["j2"]
    engine.dispose()


def _limit_variables(most: int, dbapi_connection: Any, *_: object) -> None:
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, most)


def _counted(
    statements: Statements, read: Callable[[list[int]], object], ids: list[int]
) -> tuple[object, int]:
    """What ``read`` gives for ``ids`` (``_comparable``), and the statements it took."""
    found: list[object] = []
    count = statements.of(lambda: found.append(read(ids)))
    return _comparable(found[0]), count


def _comparable(value: object) -> object:
    """``value`` with its dataclasses as dicts and each NaN as text: a NaN read is not equal
    to itself."""
    if is_dataclass(value) and not isinstance(value, type):
        return _comparable(asdict(value))
    if isinstance(value, dict):
        return {key: _comparable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_comparable(item) for item in value]
    return "NaN" if isinstance(value, float) and math.isnan(value) else value
