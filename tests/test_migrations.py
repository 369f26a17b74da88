"""The schema exists only through Alembic: round trips, and refusing databases it must not touch."""

from __future__ import annotations

import csv
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, inspect, select, text
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.stored import kept_verdicts, stored_points
from tests.templates import Templates
from tracker.errors import NotATrackerDatabase, UnknownRevision
from tracker.models import Base, Run
from tracker.sample import write_sample_job
from tracker.services.rederive import rederive
from tracker.store import codec
from tracker.store.engine import create_tracker_engine
from tracker.store.schema import (
    HEAD,
    alembic_config,
    check_schema,
    downgrade,
    revisions,
    upgrade,
)
from tracker.store.verdict_keys import key_ids

REVISIONS = revisions()


def snapshot(engine: Engine) -> dict[str, object]:
    with Session(engine) as session:
        return {
            "runs": sorted(session.execute(select(Run.arm, Run.val_loss, Run.seed)).all()),
            "points": stored_points(session).height,
        }


def test_models_and_migrations_agree(engine: Engine) -> None:
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


def test_the_head_the_code_names_is_that_of_the_migrations() -> None:
    scripts = ScriptDirectory.from_config(alembic_config())
    assert REVISIONS[0] == "0001"
    assert scripts.get_current_head() == HEAD == REVISIONS[-1]


def test_commands_do_not_import_alembic_or_plotly(tmp_path: Path) -> None:
    code = (
        "import sys; from tracker.cli import main; sys.argv = ['tracker', 'jobs']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('alembic', 'plotly', 'polars') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    # the first use of a database migrates it, the second is a plain command
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]"


def test_downgrade_to_base_and_up_again_on_a_database_with_data(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=30)))
    assert snapshot(engine)["points"] == 4 * 3 * 30
    downgrade(engine, "base")
    with engine.connect() as connection:
        tables = connection.dialect.get_table_names(connection)
    assert set(tables) <= {"alembic_version"}
    upgrade(engine)
    assert snapshot(engine)["points"] == 0
    cli("ingest", str(tmp_path / "job1"))
    assert snapshot(engine)["points"] == 4 * 3 * 30


def table_ddl(engine: Engine, table: str) -> str:
    with engine.connect() as connection:
        return str(
            connection.execute(
                text("SELECT sql FROM sqlite_master WHERE name = :table"), {"table": table}
            ).scalar_one()
        )


def test_chunks_are_keyed_by_curve_and_first_step_and_points_come_back_as_before(
    tmp_path: Path,
) -> None:
    engine = create_tracker_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    check_schema(engine)
    assert "PRIMARY KEY (curve_id, first_step)" in table_ddl(engine, "curve_chunk")
    downgrade(engine, "0004")
    ddl = table_ddl(engine, "point")
    assert "WITHOUT ROWID" in ddl
    assert "PRIMARY KEY (curve_id, step)" in ddl


def test_a_newer_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    url = f"sqlite:///{path}"
    check_schema(create_tracker_engine(url))
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE alembic_version SET version_num = 'f00d'")
    before = path.read_bytes()
    with pytest.raises(UnknownRevision):
        check_schema(create_tracker_engine(url))
    result = Cli(url)("jobs", ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: database {url} is at schema revision f00d, which this tracker does not know "
        "(newer tracker?); it was left untouched\n"
    )
    assert path.read_bytes() == before


def test_another_applications_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    before = path.read_bytes()
    url = f"sqlite:///{path}"
    with pytest.raises(NotATrackerDatabase):
        check_schema(create_engine(url))
    result = Cli(url)("ingest", str(write_sample_job(tmp_path / "j", steps=5)), ok=False)
    assert result.stderr == (
        f"Error: database {url} holds tables but no tracker schema version; it was left untouched\n"
    )
    assert path.read_bytes() == before


def test_db_current_and_upgrade_commands(tmp_path: Path) -> None:
    (tmp_path / "cmd.db").touch()  # an empty file: `db current` does not create one
    url = f"sqlite:///{tmp_path / 'cmd.db'}"
    cli = Cli(url)
    assert (
        cli("db", "current").stdout
        == f"revision (empty database), head {HEAD}: run `tracker db upgrade`\n"
    )
    assert cli("db", "upgrade").stdout == f"upgraded empty database -> {HEAD}\n"
    assert cli("db", "upgrade").stdout == f"already at {HEAD}\n"
    assert cli("db", "current").stdout == f"revision {HEAD}, head {HEAD}: up to date\n"


# Columns added after 0004: curve.n_nonfinite (0005), source_file.version (0006)
NEWER_COLUMNS = {"n_nonfinite", "version", "study", "study_digest", "checksum"}


Snapshot = dict[str, tuple[list[str], list[tuple[object, ...]]]]


def full_snapshot(engine: Engine, leave_out: set[str] | None = None) -> Snapshot:
    """Every row of every tracker table, in key order (NaN compared as text), with the
    columns' names, without the columns ``leave_out``; and every point as (curve, step,
    value): a point row before revision 0007, decoded from its chunk after (NULL, which the
    point table stored for NaN, as NaN)."""
    tables = ("job", "job_meta", "source_file", "probe", "run", "curve")
    snapshot: Snapshot = {}
    with engine.connect() as connection:
        for table in tables:
            result = connection.execute(text(f"SELECT * FROM {table} ORDER BY 1, 2"))
            columns = list(result.keys())
            rows = [tuple(repr(value) for value in row) for row in result]
            snapshot[table] = (columns, rows)
        if "point" in inspect(connection).get_table_names():
            stored = connection.execute(text("SELECT * FROM point ORDER BY 1, 2")).all()
            points = [(c, s, math.nan if v is None else v) for c, s, v in stored]
        elif connection.execute(text("SELECT version_num FROM alembic_version")).scalar() < "0012":
            points = unchecked_points(connection)  # checksums of an older seed, or none
        else:
            with Session(bind=connection) as session:
                points = stored_points(session).select("curve_id", "step", "value").rows()
    curves, steps, values = zip(*points, strict=True) if points else ((), (), ())
    # as [(repr(c), repr(s), repr(float(v))) ...], a column at a time: 49,200 points, 3 times
    texts = (map(repr, curves), map(repr, steps), map(repr, map(float, values)))
    point_rows = list(zip(*texts, strict=True))
    snapshot["point"] = (["curve_id", "step", "value"], point_rows)
    return full_snapshot_of(snapshot, leave_out)


def unchecked_points(connection: Connection) -> list[tuple[int, int, float]]:
    """Every point of chunks stored without a checksum (or one of an older seed), decoded
    as they are."""
    stored = connection.execute(
        text("SELECT curve_id, data FROM curve_chunk ORDER BY curve_id, first_step")
    )
    points = []
    for curve_id, data in stored.all():
        steps, values = codec.decode(bytes(data))
        points += [(curve_id, s, v) for s, v in zip(steps.tolist(), values.tolist(), strict=True)]
    return points


def full_snapshot_of(snapshot: Snapshot, leave_out: set[str] | None) -> Snapshot:
    """``snapshot`` without the columns ``leave_out``."""
    kept = {}
    for table, (columns, rows) in snapshot.items():
        keep = [i for i, name in enumerate(columns) if name not in (leave_out or ())]
        if len(keep) == len(columns):  # the same rows (the points: 49,200 of them)
            kept[table] = (columns, rows)
            continue
        kept[table] = ([columns[i] for i in keep], [tuple(row[i] for i in keep) for row in rows])
    return kept


def test_every_migration_step_keeps_the_data(cli: Cli, engine: Engine, tmp_path: Path) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=25)), "--meta", "gpu=A10G")
    cli("ingest", str(write_sample_job(tmp_path / "job2", seed=1, steps=25, arms=("ref_s0",))))
    before = full_snapshot(engine)
    before_0005 = full_snapshot_of(before, leave_out=NEWER_COLUMNS)
    assert len(before["point"][1]) == 4 * 3 * 25 + 3 * 25
    columns, files = before["source_file"]
    assert all(row[columns.index("version")] != "None" for row in files)  # kept at ingest
    revisions = list(REVISIONS)
    for down in reversed(revisions[:-1]):
        downgrade(engine, down)
        assert full_snapshot(engine, leave_out=NEWER_COLUMNS) == before_0005
    for up in revisions[1:]:
        upgrade(engine, up)
        assert full_snapshot(engine, leave_out=NEWER_COLUMNS) == before_0005
    # 0005 counted the non-finite points again; the listing's versions are gone (the next sync
    # reads those jobs once and keeps them), as are the digests of the jobs' study definitions
    # and the runs' notes (0009): the runs' checksums are of none, and say so to every read
    newer = {"version", "study_digest", "checksum"}
    assert full_snapshot(engine, leave_out=newer) == full_snapshot_of(before, newer)
    assert cli("db", "check").stdout.endswith(": no damage found\n")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(version) FROM source_file")).scalar() == 0


def test_deleting_a_job_leaves_no_orphan_points(cli: Cli, engine: Engine, tmp_path: Path) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=25)))
    cli("ingest", str(write_sample_job(tmp_path / "job2", seed=1, steps=10)))
    cli("delete", "job1", "--yes")
    assert snapshot(engine)["points"] == 4 * 3 * 10
    cli("ingest", str(write_sample_job(tmp_path / "new" / "job2", seed=5, steps=7)), "--replace")
    assert snapshot(engine)["points"] == 4 * 3 * 7


def database_at_0001_with_data(tmp_path: Path) -> tuple[Engine, str, Path]:
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    engine = create_tracker_engine(url)
    upgrade(engine, "0001")
    job = write_sample_job(tmp_path / "job1", steps=20)
    with sqlite3.connect(path) as connection:  # what an older tracker would have stored
        connection.execute(
            "INSERT INTO job (id, name, source_path, ingested_at, content_digest) "
            "VALUES (1, 'job1', ?, '2026-10-01 00:00:00', 'x')",
            (str(job),),
        )
        connection.execute(
            "INSERT INTO run (id, job_id, arm, model, variant, seed, extra) "
            "VALUES (1, 1, 'ref_s0', 'gpt-124m', 'ref', 0, '{}')"
        )
        connection.execute(
            "INSERT INTO curve (id, run_id, metric, n_points, first_step, last_step)"
            " VALUES (1, 1, 'loss', 3, 0, 2)"
        )
        connection.executemany(
            "INSERT INTO point VALUES (1, ?, ?)", [(0, 10.5), (1, float("inf")), (2, None)]
        )
    return engine, url, path


def test_upgrade_copies_the_file_aside_first(tmp_path: Path) -> None:
    engine, url, _ = database_at_0001_with_data(tmp_path)
    before = full_snapshot(engine)
    result = Cli(url)("db", "upgrade")
    backups = list(tmp_path.glob("old.db.0001-*.bak"))
    assert len(backups) == 1
    assert result.stdout == (
        f"upgraded 0001 -> {HEAD} (the previous file is kept at {backups[0]})\n"
    )
    assert full_snapshot(engine, leave_out=NEWER_COLUMNS) == before
    with engine.connect() as connection:  # its points: 10.5, inf and NaN (NULL)
        assert connection.execute(text("SELECT n_nonfinite FROM curve")).scalar_one() == 2
    kept = create_tracker_engine(f"sqlite:///{backups[0]}")
    with kept.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == (
            "0001"
        )
    assert full_snapshot(kept) == before


def test_a_failed_upgrade_leaves_the_original_in_place(tmp_path: Path) -> None:
    engine, url, path = database_at_0001_with_data(tmp_path)
    with sqlite3.connect(path) as connection:  # batch mode's work table: the upgrade will fail
        connection.execute("CREATE TABLE _alembic_tmp_point (x INTEGER)")
    before = full_snapshot(engine)
    result = Cli(url)("db", "upgrade", ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: upgrading {url} failed and was rolled back, it is still at revision 0001: "
        "table _alembic_tmp_point already exists\n"
    )
    assert full_snapshot(engine) == before
    assert Cli(url)("db", "current").stdout.startswith(f"revision 0001, head {HEAD}")


def derived_rows(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    """The kept rows, the verdicts as read (whatever their keys' ids)."""
    with engine.connect() as connection:
        rows = {
            table: [
                tuple(repr(value) for value in row)
                for row in connection.execute(text(f"SELECT * FROM {table} ORDER BY 1, 2, 3"))
            ]
            for table in ("job_number", "job_summary")
        }
        verdicts = kept_verdicts(connection)
    return {"job_verdict": [tuple(repr(v) for v in row.values()) for row in verdicts], **rows}


DERIVED_TABLES = {"job_verdict", "job_number", "job_summary"}


def without_checksums(
    rows: dict[str, list[tuple[object, ...]]],
) -> dict[str, list[tuple[object, ...]]]:
    """``derived_rows`` without the summaries' rows checksums (of other bytes since 0020)."""
    return {**rows, "job_summary": [row[:-1] for row in rows["job_summary"]]}


@pytest.mark.parametrize(
    ("revision", "dropped"),
    [("0002", DERIVED_TABLES), ("0003", {"job_summary"})],
)
def test_upgrades_backfill_the_derived_rows_ingest_writes(
    cli: Cli, engine: Engine, tmp_path: Path, revision: str, dropped: set[str]
) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=40)))
    cli("ingest", str(write_sample_job(tmp_path / "job2", seed=1, steps=40, arms=("ref_s0",))))
    at_ingest = derived_rows(engine)
    assert len(at_ingest["job_number"]) == 2 * 3
    assert len(at_ingest["job_verdict"]) > 2 * 75
    assert len(at_ingest["job_summary"]) == 2
    downgrade(engine, revision)
    with engine.connect() as connection:
        tables = set(connection.dialect.get_table_names(connection))
    assert tables & DERIVED_TABLES == DERIVED_TABLES - dropped
    upgrade(engine)  # the schema only: today's analysis refills the rows
    assert rederive(engine).refilled == ["job1", "job2"]
    assert derived_rows(engine) == at_ingest


DATA = Path(__file__).parent / "data"


LONG_STEPS = 16_400  # past a chunk's 16,384 points: two chunks a curve


def ingest_three_jobs(cli: Cli, root: Path) -> tuple[Snapshot, dict[str, list[tuple[object, ...]]]]:
    """Jobs of the shapes the migrations meet: a curve of two chunks, an arm that diverged
    (inf, then NaN); returns the rows of this fresh ingest (its snapshot, its derived rows)."""
    cli("ingest", str(write_sample_job(root / "job1", steps=40)))
    cli("ingest", str(write_sample_job(root / "job2", seed=1, steps=LONG_STEPS, arms=("ref_s0",))))
    cli("ingest", str(DATA / "oom_probe"))
    engine = create_tracker_engine(cli.url)
    try:
        return full_snapshot(engine), derived_rows(engine)
    finally:
        engine.dispose()


@pytest.fixture
def three_jobs(db_url: str, templates: Templates) -> str:
    """The three jobs, ingested once a session and copied."""
    templates.copy_into(db_url, ("three migrated jobs", HEAD), ingest_three_jobs)
    return db_url


def three_jobs_at(
    templates: Templates, url: str, revision: str
) -> tuple[Snapshot, dict[str, list[tuple[object, ...]]]]:
    """``url`` made a database of ``revision`` holding the three jobs' rows as it keeps them
    (today's code writes only the head's schema; each downgrade keeps the rows, see above);
    returns the rows of the fresh ingest at the head. On SQLite each revision's database is
    built once a session, from the next one's copy by one downgrade: every step runs once, not
    once for each revision below it. A PostgreSQL copy replays a dump's statements, which for
    the revisions that keep a row a point (before 0007) costs more than the downgrades saved:
    there the copy of the head is downgraded."""
    if revision == HEAD or not url.startswith("sqlite"):
        fresh = templates.copy_into(url, ("three migrated jobs", HEAD), ingest_three_jobs)
        if revision != HEAD:
            engine = create_tracker_engine(url)
            try:
                downgrade(engine, revision)
            finally:
                engine.dispose()
        return fresh
    newer = REVISIONS[REVISIONS.index(revision) + 1]

    def build(cli: Cli, _root: Path) -> tuple[Snapshot, dict[str, list[tuple[object, ...]]]]:
        fresh = three_jobs_at(templates, cli.url, newer)
        engine = create_tracker_engine(cli.url)
        try:
            downgrade(engine, revision)
        finally:
            engine.dispose()
        return fresh

    return templates.copy_into(url, ("three migrated jobs", revision), build)


@pytest.mark.parametrize("revision", REVISIONS[:-1])
def test_a_database_made_by_an_old_revision_upgrades_to_the_rows_of_a_fresh_ingest(
    templates: Templates, db_url: str, revision: str
) -> None:
    fresh, fresh_derived = three_jobs_at(templates, db_url, revision)
    assert repr(LONG_STEPS - 1) in {row[1] for row in fresh["point"][1]}
    engine = create_tracker_engine(db_url)
    try:
        assert full_snapshot(engine, NEWER_COLUMNS) == full_snapshot_of(fresh, NEWER_COLUMNS)
        assert Cli(db_url)("db", "upgrade").stdout.startswith(f"upgraded {revision} -> {HEAD}")
        older = {"version", "study_digest"}  # what the jobs of an older database lack
        if revision < "0009":  # and their runs' notes: their checksums are of none
            older.add("checksum")
        assert full_snapshot(engine, leave_out=older) == full_snapshot_of(fresh, older)
        assert derived_rows(engine) == fresh_derived
    finally:
        engine.dispose()
    assert Cli(db_url)("db", "rederive").stdout == "0 jobs rederived, 3 already up to date\n"


def non_finite_cells(csv_path: Path) -> dict[str, int]:
    """Per column of a job's CSV, its cells that read as NaN or an infinity."""
    with csv_path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    columns = [c for c in reader.fieldnames or () if c != "step"]
    words = {"nan", "inf", "-inf", "+inf", "infinity", "-infinity"}
    return {c: sum(row[c].strip().lower() in words for row in rows) for c in columns}


def test_0005_counts_each_curves_nan_and_infinite_points_as_ingest_does(
    cli: Cli, engine: Engine
) -> None:
    for name in ("oom_probe", "header_only"):
        cli("ingest", str(DATA / name))
    count = text(
        "SELECT job.name, run.arm, curve.metric, curve.n_nonfinite FROM curve"
        " JOIN run ON run.id = curve.run_id JOIN job ON job.id = run.job_id"
    )
    with engine.connect() as connection:
        at_ingest = {(j, a, m): n for j, a, m, n in connection.execute(count)}
    expected = {
        (job, csv_path.stem, metric): n
        for job in ("oom_probe", "header_only")
        for csv_path in sorted((DATA / job).glob("*.csv"))
        for metric, n in non_finite_cells(csv_path).items()
    }
    assert at_ingest == expected
    assert at_ingest["oom_probe", "linear_s0", "loss"] == 1 + 28  # one inf, then NaN
    assert sum(at_ingest.values()) == 2 * 29
    downgrade(engine, "0004")
    upgrade(engine)  # counted from the points in SQL
    with engine.connect() as connection:
        assert {(j, a, m): n for j, a, m, n in connection.execute(count)} == at_ingest


def test_0019_keys_the_verdicts_and_its_downgrade_restores_them(
    three_jobs: str, engine: Engine, db_url: str
) -> None:
    at_head = derived_rows(engine)
    with engine.connect() as connection:
        keys = connection.execute(text("SELECT count(*) FROM verdict_key")).scalar()
        assert 0 < keys < len(at_head["job_verdict"])  # the jobs share keys
    downgrade(engine, "0019")
    at_0019 = derived_rows(engine)
    assert without_checksums(at_0019) == without_checksums(at_head)  # as 0020 found them
    downgrade(engine, "0018")
    assert derived_rows(engine) == at_0019  # job_verdict's own columns again
    upgrade(engine)
    assert derived_rows(engine) == at_head
    assert Cli(db_url)("db", "check").stdout.endswith(": no damage found\n")  # checksums hold
    with Session(engine) as session, session.begin():  # a new key takes the next id
        assert key_ids(session, [("c", "s", None, "PASS", None, "d")]) == {
            ("c", "s", None, "PASS", None, "d"): keys + 1
        }
    # the kept rows hold; 0021 made the run index anew, empty: rederive fills it
    rederived = Cli(db_url)("db", "rederive").stdout
    assert rederived.endswith("3 jobs rederived, 0 already up to date\n")
    assert derived_rows(engine) == at_head


def test_0020_packs_the_verdicts_and_its_downgrade_restores_them(
    three_jobs: str, engine: Engine, db_url: str
) -> None:
    """Both ways, every job's rows and a checksum that holds; a job whose rows no longer match
    their checksum keeps them with none (read as never kept: ``db rederive`` rebuilds it)."""
    at_head = derived_rows(engine)
    downgrade(engine, "0019")
    upgrade(engine)
    assert derived_rows(engine) == at_head  # the checksums too
    assert Cli(db_url)("db", "check").stdout.endswith(": no damage found\n")
    downgrade(engine, "0019")
    with engine.begin() as connection:
        damaged = connection.execute(text("SELECT min(job_id) FROM job_verdict")).scalar()
        connection.execute(
            text("UPDATE job_verdict SET measured = 0.5 WHERE position = 1 AND job_id = :job"),
            {"job": damaged},
        )
    upgrade(engine)
    with engine.connect() as connection:
        kept = connection.execute(text("SELECT job_id, rows_checksum FROM job_summary")).all()
    assert [job_id for job_id, checksum in kept if checksum is None] == [damaged]
    Cli(db_url)("db", "rederive")  # every job: 0021 made the run index anew, empty
    assert derived_rows(engine) == at_head


def test_0021_keeps_the_run_index_and_its_downgrade_drops_it(
    three_jobs: str, engine: Engine, db_url: str
) -> None:
    """Made empty (filling it takes today's code): each job's runs are read from their rows
    until ``db rederive`` (run by ``db upgrade``) refills it, the same runs table either way."""
    cli = Cli(db_url)
    shown = ("query", "runs", "--format", "csv")
    at_head, table = derived_rows(engine), cli(*shown).stdout
    index = "SELECT job_id, code, checksum, runs FROM run_index ORDER BY job_id"
    with engine.connect() as connection:
        kept = connection.execute(text(index)).all()
    assert len(kept) == 3
    downgrade(engine, "0020")
    with engine.connect() as connection:
        assert not inspect(connection).has_table("run_index")
    assert derived_rows(engine) == at_head
    upgrade(engine)
    with engine.connect() as connection:
        assert connection.execute(text(index)).all() == []
    assert cli(*shown).stdout == table  # from the runs' rows
    assert cli("db", "rederive").stdout.endswith("3 jobs rederived, 0 already up to date\n")
    with engine.connect() as connection:
        assert connection.execute(text(index)).all() == kept
    assert cli(*shown).stdout == table
