"""The Python API: the CLI's queries as polars DataFrames, equal to the CLI's JSON output."""

from __future__ import annotations

import ast
import importlib
import json
import math
import shlex
import shutil
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sqlalchemy import Engine, text

from tests.conftest import Cli, ingest_jobs
from tracker import api
from tracker.api import rows
from tracker.config import DATABASE_URL_ENV, database_url
from tracker.errors import (
    JobExists,
    JobNotFound,
    NoSuchDatabase,
    SqlRefused,
    UnknownArm,
    UnknownMetric,
)
from tracker.sample import write_sample_job
from tracker.store.sqlite_files import sqlite_file
from tracker.summary import version

STEPS = 30
JOBS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "j1": ({"seed": 0}, ["time=2026-10-01T00:00:00Z", "gpu=A10G", "flashoptim=0.1.0"]),
    "j3": (
        {"seed": 2, "flash_state_shift": 0.5},
        ["time=2026-11-01T00:00:00Z", "gpu=A10G", "flashoptim=0.1.1"],
    ),
    "j2": (
        {"seed": 1, "failed_probe": None},
        ["time=2026-10-15T00:00:00Z", "gpu=L4", "flashoptim=0.1.0"],
    ),
}

Query = Callable[[Any], pl.DataFrame]
CASES: list[tuple[str, Query, tuple[str, ...]]] = [
    ("jobs", lambda db: api.jobs(db), ("jobs",)),
    ("probes", lambda db: api.probes(db), ("query", "probes")),
    (
        "probes filtered",
        lambda db: api.probes(
            db,
            job=["j1", "j3"],
            model="gpt-124m",
            variant=("flash", "ref"),
            where={"gpu": "A10G"},
            group_by="flashoptim",
        ),
        tuple(
            shlex.split(
                "query probes --job j1 --job j3 --model gpt-124m --variant flash --variant ref "
                "--where gpu=A10G --group-by flashoptim"
            )
        ),
    ),
    ("failed probes", lambda db: api.probes(db, failed=True), ("query", "probes", "--failed")),
    (  # known values that select nothing: an empty frame (an unknown value is an error)
        "no probes",
        lambda db: api.probes(db, model="resnet50", failed=True),
        ("query", "probes", "--model", "resnet50", "--failed"),
    ),
    ("runs", lambda db: api.runs(db), ("query", "runs")),
    (
        "runs aggregated",
        lambda db: api.runs(db, aggregate_seeds=True, group_by=["gpu"]),
        ("query", "runs", "--aggregate-seeds", "--group-by", "gpu"),
    ),
    (
        "trend of a probe field",
        lambda db: api.trend(db, "bpp_state", model="gpt-124m", variant="flash"),
        ("query", "trend", "--metric", "bpp_state", "--model", "gpt-124m", "--variant", "flash"),
    ),
    (
        "trend of a run field",
        lambda db: api.trend(db, "val_loss", variant="ref", where={"gpu": "A10G"}),
        ("query", "trend", "--metric", "val_loss", "--variant", "ref", "--where", "gpu=A10G"),
    ),
    (
        "curve",
        lambda db: api.curve(db, "linear_s0", job="j1", ema=0.2, every=3),
        ("query", "curve", "--arm", "linear_s0", "--job", "j1", "--ema", "0.2", "--every", "3"),
    ),
    (
        "curves",
        lambda db: api.curve(db, ["ref_s0", "flash_s0"]),
        ("query", "curve", "--arm", "ref_s0", "--arm", "flash_s0"),
    ),
    ("compare", lambda db: api.compare(db, "j1", "j3"), ("compare", "j1", "j3")),
    (
        "a selection given whole",
        lambda db: api.runs(
            db, api.JobSelection(variants=("ref",), group_by=("gpu",)), aggregate_seeds=True
        ),
        ("query", "runs", "--variant", "ref", "--group-by", "gpu", "--aggregate-seeds"),
    ),
]


def js(value: Any) -> Any:
    """A value as the CLI's JSON shows it: non-finite numbers are strings, times ISO 8601."""
    if isinstance(value, datetime):
        assert value.utcoffset() == timedelta(0), value
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


@pytest.fixture(params=["url", "engine", "environment"])
def database(
    request: pytest.FixtureRequest, db_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """The database as a URL, an Engine, or None with the URL in the environment."""
    if request.param == "environment":
        monkeypatch.setenv(DATABASE_URL_ENV, db_url)
        return None
    return db_url if request.param == "url" else engine


@pytest.mark.parametrize(("query", "args"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_frames_equal_the_cli_json(
    study: Cli, database: Any, query: Query, args: tuple[str, ...]
) -> None:
    frame = query(database)
    assert isinstance(frame, pl.DataFrame)
    expected = json.loads(study(*args, "--format", "json").stdout)
    assert [{k: js(v) for k, v in row.items()} for row in frame.to_dicts()] == expected
    if expected:
        assert frame.columns == list(expected[0])


def test_times_are_utc_datetimes(study: Cli, database: Any) -> None:
    utc = pl.Datetime("us", "UTC")
    jobs = api.jobs(database)
    assert (jobs.schema["time"], jobs.schema["ingested_at"]) == (utc, utc)
    assert jobs["time"].to_list()[0] == datetime.fromisoformat("2026-10-01T00:00:00+00:00")
    for frame in (api.probes(database), api.runs(database), api.trend(database, "val_loss")):
        assert frame.schema["time"] == utc


def test_empty_frames_keep_their_columns(study: Cli, database: Any) -> None:
    empty = api.probes(database, model="resnet50", failed=True)
    assert empty.height == 0 and empty.columns == api.probes(database).columns
    empty = api.runs(database, model="resnet50")  # probed, never trained
    assert empty.height == 0 and empty.columns == api.runs(database).columns


@pytest.fixture(params=["url", "engine", "environment"])
def reader(
    request: pytest.FixtureRequest, reader_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """``database`` for ``api.sql``, as a role that is no PostgreSQL superuser."""
    if request.param == "environment":
        monkeypatch.setenv(DATABASE_URL_ENV, reader_url)
        yield None
    elif request.param == "url":
        yield reader_url
    else:
        engine = api.connect(reader_url)
        yield engine
        engine.dispose()


def test_an_engine_stays_usable_after_api_calls(
    study: Cli, engine: Engine, reader_url: str
) -> None:
    reading = api.connect(reader_url)
    for _ in range(2):
        assert api.probes(engine, job="j1").height == 25
        assert api.sql(reading, "SELECT count(*) AS n FROM job")["n"].to_list() == [3]
    reading.dispose()
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM run")).scalar_one() == 12


def test_connect_gives_an_engine(study: Cli, db_url: str) -> None:
    engine = api.connect(db_url)
    try:
        assert isinstance(engine, Engine)
        assert api.jobs(engine)["job"].to_list() == ["j1", "j2", "j3"]
    finally:
        engine.dispose()


def test_sql(study: Cli, reader: Any, reader_url: str) -> None:
    database = reader
    statement = "SELECT name, source_path FROM job ORDER BY name"
    frame = api.sql(database, statement)
    assert isinstance(frame, pl.DataFrame)
    assert frame.columns == ["name", "source_path"]
    assert frame["name"].to_list() == ["j1", "j2", "j3"]
    cli_json = Cli(reader_url)("sql", statement, "--format", "json").stdout
    assert frame.to_dicts() == json.loads(cli_json)
    counted = api.sql(
        database,
        "SELECT r.arm, sum(k.n_points) AS points FROM run r JOIN curve c ON c.run_id = r.id "
        "JOIN curve_chunk k ON k.curve_id = c.id JOIN job j ON j.id = r.job_id "
        "WHERE j.name = 'j1' AND c.metric = 'loss' GROUP BY r.arm ORDER BY r.arm",
    )
    assert counted.rows() == [(arm, STEPS) for arm in ("flash_s0", "linear_s0", "ref_s0", "ref_s1")]
    empty = api.sql(database, "SELECT name FROM job WHERE name = 'nope'")
    assert (empty.columns, empty.height) == (["name"], 0)


def test_sql_refuses_writes(study: Cli, reader: Any) -> None:
    database = reader
    with pytest.raises(SqlRefused, match=r"^sql: .*tracker sql only reads$"):
        api.sql(database, "DELETE FROM job")
    with pytest.raises(SqlRefused, match=r"^sql: give one statement at a time$"):
        api.sql(database, "SELECT 1; DELETE FROM job")
    assert api.sql(database, "SELECT count(*) AS n FROM job")["n"].to_list() == [3]


def test_expected_errors_are_tracker_errors(study: Cli, database: Any) -> None:
    with pytest.raises(UnknownMetric, match=r"^unknown metric 'nope'; choose one of: "):
        api.trend(database, "nope")
    with pytest.raises(JobNotFound, match=r"^no job named 'nope'; known jobs: j1, j2, j3$"):
        api.compare(database, "j1", "nope")
    with pytest.raises(JobNotFound, match=r"^no job named 'nope'; known jobs: j1, j2, j3$"):
        api.probes(database, job=["j1", "nope"])
    with pytest.raises(UnknownArm, match=r"^no arm 'nosuch_s0' in the selected jobs; "):
        api.curve(database, "nosuch_s0")


def readme_python_examples() -> list[str]:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_every_readme_python_example_runs(
    cli: Cli, reader_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's API examples, on a database holding the jobs they name; their URLs (a
    placeholder file, a placeholder server) stand for the test's database."""
    readme_jobs = {
        "job2": ({"seed": 0}, ["gpu=A10G", "flashoptim=0.1.0"]),
        "job3": ({"seed": 1, "flash_state_shift": 0.5}, ["gpu=A10G", "flashoptim=0.1.1"]),
    }
    ingest_jobs(cli, tmp_path, readme_jobs, STEPS)
    monkeypatch.setenv(DATABASE_URL_ENV, reader_url)
    monkeypatch.chdir(tmp_path)  # what an example writes (export's points/) lands here
    namespace: dict[str, Any] = {}
    lines = readme_python_examples()
    assert len(lines) >= 10
    for line in lines:
        code = line.split("#", 1)[0].strip()
        for placeholder in ("sqlite:///study.db", "postgresql+psycopg://me@dbhost/tracker"):
            code = code.replace(f'"{placeholder}"', repr(reader_url))
        if code.startswith(("import ", "from ")) or " = " in code:
            exec(code, namespace)
            continue
        result = eval(code, namespace)
        assert isinstance(result, pl.DataFrame) and result.height > 0, line
    namespace["db"].dispose()


def test_storing_from_python_ingests_syncs_rederives_and_upgrades(
    db_url: str, tmp_path: Path
) -> None:
    """A notebook stores as the commands do: ``api.upgrade`` migrates an empty database,
    ``api.ingest`` one directory (metadata given, an unchanged one told so, a name taken
    refused), ``api.sync`` what is left under the prefix, ``api.rederive`` finds nothing
    to refill."""
    told: list[str] = []
    upgraded = api.upgrade(db_url, on_migrated=lambda done: told.append(done.outcome_line()))
    assert told == [upgraded.outcome_line()] == [f"upgraded empty database -> {api.HEAD}"]
    jobs = tmp_path / "jobs"
    first = write_sample_job(jobs / "j1", seed=0, steps=STEPS)
    result = api.ingest(db_url, first, meta={"gpu": "A10G"})
    assert (result.job, result.status, result.arms) == ("j1", "ingested", 4)
    assert result.points > 0 and result.probes > result.failed_probes
    assert api.ingest(db_url, first).outcome_line() == (
        "j1: unchanged, already ingested with identical content"
    )
    other = write_sample_job(tmp_path / "other", seed=5, steps=STEPS)
    with pytest.raises(JobExists) as refused:
        api.ingest(db_url, other, name="j1")
    assert str(refused.value) == (
        "job 'j1' already exists with different content; use --replace to swap it"
    )
    write_sample_job(jobs / "j2", seed=1, steps=STEPS)
    seen: list[str] = []
    synced = api.sync(db_url, jobs, on_job=lambda job: seen.append(job.location))
    assert synced.outcome_line() == "2 found: 1 ingested, 1 unchanged, 0 failed"
    assert sorted(Path(location).name for location in seen) == ["j1", "j2"]
    assert api.job_meta(db_url, "j1") == {"gpu": "A10G"}
    assert api.rederive(db_url).outcome_line() == "0 jobs rederived, 2 already up to date"
    assert api.upgrade(db_url).outcome_line() == f"already at {api.HEAD}"


def test_a_urls_engine_is_kept_between_calls_with_no_connection_held(
    db_url: str, tmp_path: Path
) -> None:
    """A script's calls on a URL share one engine: the second call compiles no statement
    anew; between calls the engine holds no connection, and each call checks the database
    again (a SQLite file gone is refused, not made anew)."""
    api.ingest(db_url, write_sample_job(tmp_path / "j", steps=STEPS))
    api.runs(db_url)
    engine = rows._kept_engine(database_url(db_url))
    cache = engine._compiled_cache
    assert cache is not None
    compiled = len(cache)
    api.runs(db_url)
    assert len(cache) == compiled
    assert engine.pool.checkedin() + engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    path = sqlite_file(db_url)
    if path is not None:
        Path(path).rename(tmp_path / "moved.db")
        with pytest.raises(NoSuchDatabase):
            api.runs(db_url)
        assert not Path(path).exists()


def test_changed_analysis_code_makes_rederive_refill_every_job(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept rows are keyed by the digest of the analysis code: the same code refills
    no job, another (an edited analysis) every one of them, once."""
    for seed in range(3):
        api.ingest(db_url, write_sample_job(tmp_path / f"j{seed}", seed=seed, steps=STEPS))
    unchanged = api.rederive(db_url)
    assert (unchanged.jobs, unchanged.refilled) == (3, [])
    monkeypatch.setattr(version, "CODE_DIGEST", "an edited analysis")
    refilled: list[str] = []
    changed = api.rederive(db_url, on_job=refilled.append)
    assert (changed.jobs, changed.refilled, refilled) == (3, ["j0", "j1", "j2"], refilled)
    assert api.rederive(db_url).refilled == []


def test_the_code_digest_follows_the_code_that_makes_kept_rows(tmp_path: Path) -> None:
    """An edit of a module the kept rows' maker imports (directly or not), or a module it
    comes to import, is another digest; an edit of code that only reads kept rows (the gate)
    is not; the same files are the same digest, wherever they are."""
    shutil.copytree(version.SOURCE_ROOT / "tracker", tmp_path / "tracker")
    assert version.code_digest(tmp_path) == version.code_digest() == version.CODE_DIGEST
    made_by = {path.relative_to(tmp_path).as_posix() for path in version.code_files(tmp_path)}
    assert {"tracker/summary/build.py", "tracker/analysis/verdict.py", "tracker/jsonio.py"} <= (
        made_by
    )
    assert "tracker/analysis/gate.py" not in made_by

    def edited(module: str, line: str) -> str:
        path = tmp_path / module
        path.write_text(path.read_text() + line)
        return version.code_digest(tmp_path)

    assert edited("tracker/analysis/gate.py", "\n# read-time code\n") == version.CODE_DIGEST
    by_verdict = edited("tracker/analysis/verdict.py", "\n# a comment is a change too\n")
    assert by_verdict != version.CODE_DIGEST
    by_import = edited("tracker/summary/build.py", "from tracker.analysis import gate\n")
    assert by_import not in (by_verdict, version.CODE_DIGEST)
    assert edited("tracker/analysis/gate.py", "# now it counts\n") != by_import


# The digest of the code that makes kept rows, pinned. An edit of any file of it (a comment
# too) makes every database's kept rows stale: pages then derive them from points (minutes at
# 10,000 jobs) until ``tracker db rederive``. An edit meant to is written here, and says why.
KEPT_ROWS_CODE = "9782250e67b6daaf7897d59ded650d586ec220d80be1fc736309d9170c66516c"


def test_the_code_that_makes_kept_rows_changes_only_on_purpose() -> None:
    files = [path.relative_to(version.SOURCE_ROOT).as_posix() for path in version.code_files()]
    assert version.CODE_DIGEST == KEPT_ROWS_CODE, f"kept rows made stale by an edit of {files}"


def test_a_selection_is_given_whole_or_by_keywords_not_both(study: Cli, db_url: str) -> None:
    with pytest.raises(TypeError, match="give a JobSelection or its parts as keywords"):
        api.runs(db_url, api.JobSelection(variants=("ref",)), model="gpt-124m")


def test_the_front_door_names_each_name_once_by_its_module() -> None:
    """``tracker.api`` loads a name's module when the name is asked for: the names mypy sees
    (its ``TYPE_CHECKING`` imports) are those it loads, and each module exports them."""
    tree = ast.parse(Path(api.__file__).read_text(encoding="utf-8"))
    typed = {
        alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module != "__future__"
        for alias in node.names
        if alias.asname == alias.name
    }
    assert typed == api._HOMES
    for name, module in api._HOMES.items():
        assert getattr(api, name) is getattr(importlib.import_module(module), name)
    for module in {module for module in api._HOMES.values() if module.startswith("tracker.api.")}:
        assert set(importlib.import_module(module).__all__) <= set(api._HOMES)
