"""``tracker sql``: reads work in every format; every kind of write is refused on each backend,
with one ``Error: sql: ...`` line, and leaves the data and the filesystem as they were."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sqlalchemy import Engine, func, inspect, make_url, select
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.stored import stored_points
from tracker.models import Curve, CurveChunk, Job, JobMeta, Probe, Run, SourceFile
from tracker.sample import write_sample_job
from tracker.store.schema import open_database

STEPS = 12
ONLY_READS = "tracker sql only reads"


def backend(db_url: str) -> str:
    return make_url(db_url).get_backend_name()


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    return write_sample_job(tmp_path / "job1", steps=STEPS)


@pytest.fixture
def loaded(cli: Cli, job_dir: Path, reader_url: str) -> Cli:
    """The job ingested; ``tracker sql`` as a reader (on PostgreSQL, not a superuser)."""
    cli("ingest", str(job_dir), "--meta", "gpu=A10G")
    return Cli(reader_url)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory the database server's own OS user could write to, were it allowed to: under
    the system temporary directory (pytest's is private to us), open to everyone."""
    directory = Path(tempfile.mkdtemp(prefix="tracker-sql-test-"))
    os.chmod(directory, 0o777)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def snapshot(engine: Engine) -> dict[str, Any]:
    with Session(engine) as session:
        counts = {
            model.__tablename__: session.scalar(select(func.count()).select_from(model))
            for model in (Job, JobMeta, SourceFile, Probe, Run, Curve, CurveChunk)
        }
        names = session.scalars(select(Job.name).order_by(Job.name)).all()
        meta = session.execute(select(JobMeta.key, JobMeta.value).order_by(JobMeta.key)).all()
        points = stored_points(session).filter(pl.col("value") < 1e300)["value"].sum()
    with engine.connect() as connection:
        tables = sorted(inspect(connection).get_table_names())
    return {"counts": counts, "names": names, "meta": meta, "points": points, "tables": tables}


def refused(result: Any) -> str:
    """The one error line of a refused statement."""
    assert result.exit_code == 1, result.stdout
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.stdout == ""
    assert result.stderr.startswith("Error: sql: ")
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n")
    return str(result.stderr)


# --- reads ---------------------------------------------------------------------------------


def test_select_in_every_format(loaded: Cli) -> None:
    statement = (
        "SELECT name, 7 AS n, CAST(2.5 AS DOUBLE PRECISION) AS x, NULL AS empty, 'a,b' AS text "
        "FROM job ORDER BY name"
    )
    table = loaded("sql", statement).stdout.splitlines()
    assert table[0].split() == ["name", "n", "x", "empty", "text"]
    assert set(table[1]) == {"-", " "}
    assert table[2].split() == ["job1", "7", "2.5", "a,b"]
    assert loaded("sql", statement, "--format", "csv").stdout == (
        'name,n,x,empty,text\njob1,7,2.5,,"a,b"\n'
    )
    assert json.loads(loaded("sql", statement, "--format", "json").stdout) == [
        {"name": "job1", "n": 7, "x": 2.5, "empty": None, "text": "a,b"}
    ]


def test_select_reads_the_data(loaded: Cli, job_dir: Path) -> None:
    rows = json.loads(
        loaded(
            "sql",
            "SELECT c.metric, sum(k.n_points) AS points FROM curve_chunk k "
            "JOIN curve c ON c.id = k.curve_id "
            "GROUP BY c.metric ORDER BY c.metric",
            "-f",
            "json",
        ).stdout
    )
    assert rows == [{"metric": m, "points": 4 * STEPS} for m in ("loss", "lr", "step_ms")]
    recursive = loaded(
        "sql",
        "WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 3) "
        "SELECT x FROM s",
        "-f",
        "csv",
    )
    assert recursive.stdout == "x\n1\n2\n3\n"
    one = loaded("sql", "SELECT 1 AS a;", "-f", "csv")  # a trailing semicolon is one statement
    assert one.stdout == "a\n1\n"
    records = json.loads((job_dir / "mem_sweep.json").read_text())
    flash = next(r for r in records if (r["model"], r["variant"]) == ("gpt-124m", "flash"))
    state = json.loads(
        loaded(
            "sql",
            "SELECT bpp_state FROM probe WHERE model = 'gpt-124m' AND variant = 'flash'",
            "-f",
            "json",
        ).stdout
    )
    assert state == [{"bpp_state": flash["bpp_state"]}]


def test_numbers_are_json_numbers_on_every_backend(loaded: Cli, job_dir: Path) -> None:
    """avg() of an integer column is NUMERIC on PostgreSQL: still a number in JSON."""
    records = json.loads((job_dir / "mem_sweep.json").read_text())
    mean = statistics.mean(r["n_params"] for r in records if "n_params" in r)
    (row,) = json.loads(
        loaded(
            "sql",
            "SELECT avg(n_params) AS mean_params, 2.5 AS x FROM probe WHERE n_params IS NOT NULL",
            "-f",
            "json",
        ).stdout
    )
    assert isinstance(row["mean_params"], int | float), row
    assert row["mean_params"] == pytest.approx(mean)
    assert row["x"] == 2.5


def test_a_query_error_is_one_line(loaded: Cli, db_url: str) -> None:
    line = refused(loaded("sql", "SELECT * FROM nope", ok=False))
    expected = {
        "sqlite": "Error: sql: no such table: nope\n",
        "postgresql": 'Error: sql: relation "nope" does not exist\n',
    }
    assert line == expected[backend(db_url)]


def test_a_query_of_the_point_table_says_where_points_went(loaded: Cli, db_url: str) -> None:
    line = refused(loaded("sql", "SELECT count(*) FROM point", ok=False))
    missing = {"sqlite": "no such table: point", "postgresql": 'relation "point" does not exist'}
    assert line == (
        f"Error: sql: {missing[backend(db_url)]}: curve points are no longer rows of a table but "
        "compressed chunks (curve_chunk); read them with `tracker query curve`, or write them as "
        "Parquet with `tracker export DIR` and query that\n"
    )


def test_in_memory_database_has_nothing_to_query() -> None:
    # in a child process with a deadline: opening an in-memory database must not hang
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tracker", "--db", "sqlite://", "sql", "SELECT 1"],
            capture_output=True,
            text=True,
            timeout=600,  # a safety net against a hang, far beyond any machine's start-up
        )
    except subprocess.TimeoutExpired:
        pytest.fail("`tracker --db sqlite:// sql 'SELECT 1'` still runs after 600 s")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "Error: sql: an in-memory database has nothing to query\n"


# --- writes and escapes --------------------------------------------------------------------

READ_ONLY_TX = "Error: sql: cannot execute {} in a read-only transaction: " + ONLY_READS + "\n"
NOT_AUTHORIZED = f"Error: sql: not authorized: {ONLY_READS}\n"
ONE_STATEMENT = "Error: sql: give one statement at a time\n"
DO_AS_SESSION_USER = (
    "DO $$ BEGIN EXECUTE 'SET ROLE ' || quote_ident(session_user); "
    "EXECUTE 'COPY (SELECT 1) TO PROGRAM ''touch {outside}/pwned-do'''; END $$"
)

# (id, statement, exact message on SQLite, exact message on PostgreSQL); None: any one line
REFUSED: list[tuple[str, str, str | None, str | None]] = [
    (
        "insert",
        "INSERT INTO job_meta (job_id, key, value) SELECT id, 'evil', 'x' FROM job",
        NOT_AUTHORIZED,
        READ_ONLY_TX.format("INSERT"),
    ),
    ("update", "UPDATE job SET name = 'renamed'", NOT_AUTHORIZED, READ_ONLY_TX.format("UPDATE")),
    ("delete", "DELETE FROM curve_chunk", NOT_AUTHORIZED, READ_ONLY_TX.format("DELETE")),
    ("drop", "DROP TABLE curve_chunk", NOT_AUTHORIZED, READ_ONLY_TX.format("DROP TABLE")),
    (
        "create",
        "CREATE TABLE evil (a integer)",
        NOT_AUTHORIZED,
        READ_ONLY_TX.format("CREATE TABLE"),
    ),
    ("create temp", "CREATE TEMP TABLE evil (a integer)", NOT_AUTHORIZED, None),
    ("attach", "ATTACH DATABASE '{outside}/x.db' AS x", NOT_AUTHORIZED, None),
    ("pragma", "PRAGMA journal_mode=delete", NOT_AUTHORIZED, None),
    (
        "load_extension",
        "SELECT load_extension('x')",
        "Error: sql: not authorized to use function: load_extension\n",
        None,
    ),
    ("vacuum into", "VACUUM INTO '{outside}/copy.db'", None, None),
    ("two statements", "SELECT 1; SELECT 2", ONE_STATEMENT, ONE_STATEMENT),
    ("read then write", "SELECT 1; DELETE FROM curve_chunk", ONE_STATEMENT, ONE_STATEMENT),
    ("copy to program", "COPY (SELECT 1) TO PROGRAM 'touch {outside}/pwned'", None, None),
    ("copy to file", "COPY job TO '{outside}/dump.txt'", None, None),
    (
        "create extension",
        "CREATE EXTENSION IF NOT EXISTS pg_trgm",
        None,
        READ_ONLY_TX.format("CREATE EXTENSION"),
    ),
    ("do: regain the session role", DO_AS_SESSION_USER, None, None),
]


@pytest.mark.parametrize(
    ("statement", "sqlite", "postgresql"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_writes_and_escapes_are_refused(
    loaded: Cli,
    engine: Engine,
    db_url: str,
    outside: Path,
    statement: str,
    sqlite: str | None,
    postgresql: str | None,
) -> None:
    before = snapshot(engine)
    result = loaded("sql", statement.format(outside=outside), ok=False)
    line = refused(result)
    exact = {"sqlite": sqlite, "postgresql": postgresql}[backend(db_url)]
    if exact is not None:
        assert line == exact
    assert list(outside.iterdir()) == []  # no file written, attached, copied or touched
    assert snapshot(engine) == before
    assert loaded("sql", "SELECT count(*) AS n FROM job", "-f", "csv").stdout == "n\n1\n"


def test_sqlite_path_with_a_hash_is_opened_read_only(tmp_path: Path) -> None:
    """The read-only open builds a ``file:`` URI: a '#' in the path must not cut it short
    (SQLite would open, and create, the file named by the part before the '#')."""
    directory = tmp_path / "study#2"
    directory.mkdir()
    url = f"sqlite:///{directory / 'tracker.db'}"
    cli = Cli(url)
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=STEPS, arms=())))
    result = cli("sql", "SELECT name FROM job", "-f", "csv", ok=False)
    assert not (tmp_path / "study").exists()
    assert (result.exit_code, result.stdout, result.stderr) == (0, "name\njob1\n", "")


def test_refused_statements_in_csv_and_json_too(loaded: Cli) -> None:
    for fmt in ("csv", "json"):
        refused(loaded("sql", "DELETE FROM job", "--format", fmt, ok=False))


def test_times_show_as_every_listing_shows_them(cli: Cli, loaded: Cli) -> None:
    (job,) = json.loads(cli("jobs", "-f", "json").stdout)
    shown = job["ingested_at"]
    assert len(shown) == 20 and shown.endswith("Z") and shown[10] == "T"  # ISO 8601, UTC
    statement = "SELECT name, ingested_at FROM job"
    assert json.loads(loaded("sql", statement, "-f", "json").stdout) == [
        {"name": "job1", "ingested_at": shown}
    ]
    assert loaded("sql", statement, "-f", "csv").stdout == f"name,ingested_at\njob1,{shown}\n"
    assert loaded("sql", statement).stdout.splitlines()[2].split() == ["job1", shown]
    cli("meta", "job1", "gpu=2026-10-01 09:00:00")
    meta = loaded("sql", "SELECT value FROM job_meta WHERE key = 'gpu'", "-f", "csv").stdout
    assert meta == "value\n2026-10-01 09:00:00\n"  # text stays text, even if it looks a time


def test_sql_checks_the_schema_first(tmp_path: Path) -> None:
    (tmp_path / "fresh.db").touch()  # an empty file, as a fresh database is
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    rows = list(
        csv.DictReader(io.StringIO(Cli(url)("sql", "SELECT * FROM job", "-f", "csv").stdout))
    )
    assert rows == []  # the empty database was migrated first, so the table exists


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_postgresql_superuser_is_refused(cli: Cli, job_dir: Path, db_url: str) -> None:
    """A superuser can SET ROLE back from inside a DO block and then write files or run
    programs on the server: no in-session guard holds, so tracker sql refuses to run."""
    cli("ingest", str(job_dir))
    user = make_url(db_url).username
    line = refused(cli("sql", "SELECT 1", ok=False))
    assert line == (
        f"Error: sql: will not run as PostgreSQL superuser {user!r}: superusers can leave any "
        "read-only guard; connect as a role without superuser rights\n"
    )


ENDLESS = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"


def test_a_statement_past_its_time_limit_is_stopped_in_one_line(loaded: Cli) -> None:
    """An endless recursive query ends at ``--timeout`` with the same line on both backends
    (the limit firing is the behaviour; how long it took is not asserted)."""
    result = loaded("sql", "--timeout", "0.5", ENDLESS, ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: sql: the statement ran past the time limit of 0.5 s (--timeout)\n"
    )
    assert result.stdout == ""
    quick = loaded("sql", "--timeout", "0.5", "SELECT count(*) AS n FROM job", "--format", "json")
    assert json.loads(quick.stdout) == [{"n": 1}]


def test_the_time_limit_must_be_positive(loaded: Cli) -> None:
    result = loaded("sql", "--timeout", "0", "SELECT 1", ok=False)
    assert result.exit_code == 2
    assert "Invalid value for '--timeout'" in result.stderr


ENDLESS_ROWS = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x FROM n"


def test_an_endless_result_is_refused_past_max_rows_in_one_line(loaded: Cli) -> None:
    """Endless rows: refused at the cap, so they were fetched as they came, never all."""
    assert refused(loaded("sql", "--max-rows", "1000", ENDLESS_ROWS, ok=False)) == (
        "Error: sql: the result has more than 1000 rows (--max-rows)\n"
    )
    exact = loaded("sql", "--max-rows", "3", f"{ENDLESS_ROWS} LIMIT 3", "--format", "csv")
    assert exact.stdout == "x\n1\n2\n3\n"


def test_the_time_limit_covers_fetching_endless_rows(loaded: Cli) -> None:
    result = loaded("sql", "--timeout", "0.5", "--max-rows", "1000000000", ENDLESS_ROWS, ok=False)
    assert refused(result) == (
        "Error: sql: the statement ran past the time limit of 0.5 s (--timeout)\n"
    )


@pytest.mark.parametrize(
    "statement",
    ["SELECT repeat('x', 5000) AS big", "SELECT name, repeat('y', 600) FROM job, generate_series"],
    ids=["one value", "many rows"],
)
def test_a_result_past_max_bytes_is_refused_in_one_line(
    loaded: Cli, db_url: str, statement: str
) -> None:
    if backend(db_url) == "sqlite":  # the same values, in SQLite's words
        statement = statement.replace("repeat('x', 5000)", "hex(zeroblob(2500))")
        statement = statement.replace(
            "repeat('y', 600) FROM job, generate_series",
            "hex(zeroblob(300)) FROM job, (WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT"
            " x + 1 FROM n LIMIT 10) SELECT x FROM n)",
        )
    else:
        statement = statement.replace("generate_series", "generate_series(1, 10)")
    assert refused(loaded("sql", "--max-bytes", "4000", statement, ok=False)) == (
        "Error: sql: the result is larger than 4000 bytes (--max-bytes)\n"
    )
    assert loaded("sql", "--max-bytes", "100000", statement, "--format", "csv").exit_code == 0


def test_a_value_larger_than_max_bytes_is_not_made_on_sqlite(tmp_path: Path) -> None:
    """SQLite refuses to make it at all (SQLITE_LIMIT_LENGTH): randomblob(900 MB) costs
    nothing. SQLite's alone, so on a database of its own."""
    url = f"sqlite:///{tmp_path / 'sqlite-only.db'}"
    open_database(url).dispose()
    cli = Cli(url)
    assert refused(cli("sql", "SELECT randomblob(900000000)", ok=False)) == (
        "Error: sql: the result is larger than 64 MiB (--max-bytes)\n"
    )
