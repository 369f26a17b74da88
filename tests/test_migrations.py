"""The schema exists only through Alembic: round trips, and refusing databases it must not touch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, func, select, text
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tracker.errors import NotATrackerDatabase, UnknownRevision
from tracker.jobdir.sample import write_sample_job
from tracker.models import Base, Point, Run
from tracker.store.db import check_schema, create_tracker_engine, downgrade, upgrade


def snapshot(engine: Engine) -> dict[str, object]:
    with Session(engine) as session:
        return {
            "runs": sorted(session.execute(select(Run.arm, Run.val_loss, Run.seed)).all()),
            "points": session.scalar(select(func.count()).select_from(Point)),
            "values": session.scalar(select(func.sum(Point.value))),
        }


def test_models_and_migrations_agree(engine: Engine) -> None:
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


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


def test_point_table_is_without_rowid_on_sqlite(tmp_path: Path) -> None:
    engine = create_tracker_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    check_schema(engine)
    with engine.connect() as connection:
        ddl = connection.execute(
            text("SELECT sql FROM sqlite_master WHERE name = 'point'")
        ).scalar_one()
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
    url = f"sqlite:///{tmp_path / 'cmd.db'}"
    cli = Cli(url)
    assert (
        cli("db", "current").stdout
        == "revision (empty database), head 0001: run `tracker db upgrade`\n"
    )
    assert cli("db", "upgrade").stdout == "upgraded empty database -> 0001\n"
    assert cli("db", "upgrade").stdout == "already at 0001\n"
    assert cli("db", "current").stdout == "revision 0001, head 0001: up to date\n"
