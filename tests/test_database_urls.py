"""Database URLs as users type them: a mistyped SQLite path never becomes a new, empty
database; bare paths and ``postgres://`` URLs are understood."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli
from tracker.sample import write_sample_job

READING_COMMANDS = [
    ["jobs"],
    ["show", "job1"],
    ["delete", "job1"],
    ["report", "--out", "unused-report"],
    ["query", "probes"],
    ["query", "runs"],
    ["query", "curve", "--arm", "ref_s0"],
    ["query", "trend", "--metric", "val_loss"],
    ["compare", "job1", "job2"],
    ["sql", "SELECT 1"],
    ["db", "current"],
    ["serve", "--port", "0"],
]


def no_such_file(path: Path) -> str:
    return (
        f"Error: no database file {path}; only `tracker ingest`, `tracker demo` and "
        "`tracker db upgrade` create one\n"
    )


@pytest.mark.parametrize("args", READING_COMMANDS, ids=" ".join)
def test_reading_commands_refuse_a_missing_file(tmp_path: Path, args: list[str]) -> None:
    typo = tmp_path / "typo.db"
    result = Cli(f"sqlite:///{typo}")(*args, ok=False)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", no_such_file(typo))
    assert not typo.exists()


def test_copy_refuses_a_missing_source(db_url: str, tmp_path: Path) -> None:
    missing = tmp_path / "nonexist.db"
    result = Cli("sqlite://")("db", "copy", f"sqlite:///{missing}", db_url, ok=False)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", no_such_file(missing))
    assert not missing.exists()


def test_copy_creates_a_missing_sqlite_destination(cli: Cli, tmp_path: Path) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=5, arms=())))
    target = tmp_path / "copy.db"
    copied = cli("db", "copy", cli.url, f"sqlite:///{target}")
    assert copied.stdout.splitlines()[-1] == "1 jobs copied"
    assert Cli(f"sqlite:///{target}")("jobs", "-f", "csv").stdout.count("\njob1,") == 1


def test_ingest_demo_and_upgrade_create_the_file(tmp_path: Path) -> None:
    demo = ["demo", "--steps", "10", "--dir", str(tmp_path / "d"), "--out", str(tmp_path / "r")]
    for name, args in [
        ("ingest.db", ["ingest", str(write_sample_job(tmp_path / "job1", steps=5, arms=()))]),
        ("upgrade.db", ["db", "upgrade"]),
        ("demo.db", demo),
    ]:
        path = tmp_path / name
        Cli(f"sqlite:///{path}")(*args)
        assert Cli(f"sqlite:///{path}")("db", "current").stdout.endswith(": up to date\n")


def test_a_failed_ingest_creates_no_file(tmp_path: Path) -> None:
    typo = tmp_path / "trackr.db"
    broken = write_sample_job(tmp_path / "broken", steps=5)
    (broken / "ref_s0.csv").write_text("step,loss\n0,oops\n")
    missing = tmp_path / "no" / "such" / "dir"
    result = Cli(f"sqlite:///{typo}")("ingest", str(missing), str(broken), ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {missing}: no such directory\n"
        f"Error: {broken}: ref_s0.csv line 2: loss 'oops' is not a number\n",
    )
    assert list(tmp_path.iterdir()) == [broken]  # no trackr.db, no -wal, no -shm


@pytest.mark.parametrize("scheme", ["mysql", "postgresql+psycopg2", "SQLITE"])
def test_an_unsupported_scheme_names_the_supported_ones(scheme: str) -> None:
    expected = (
        f"Error: unsupported database URL scheme '{scheme}://': the tracker works with "
        "SQLite (sqlite:///FILE) and PostgreSQL (postgresql://USER@HOST/DATABASE, psycopg 3)\n"
    )
    for args in (["jobs"], ["ingest", "unused"], ["serve", "--port", "0"]):
        result = Cli(f"{scheme}://x@y/z")(*args, ok=False)
        assert (result.exit_code, result.stderr) == (1, expected)


@pytest.mark.parametrize("path", ["typo.db", "/data/study.db"])
def test_a_bare_path_suggests_the_sqlite_url(path: str) -> None:
    expected = f"Error: {path!r} is not a database URL; for a SQLite file write sqlite:///{path}\n"
    result = Cli(path)("jobs", ok=False)
    assert (result.exit_code, result.stderr) == (1, expected)
    copy = Cli("sqlite://")("db", "copy", path, "sqlite://", ok=False)
    assert (copy.exit_code, copy.stderr) == (1, expected)


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_postgres_urls_as_users_type_them(cli: Cli, db_url: str, scheme: str) -> None:
    typed = db_url.replace("postgresql+psycopg://", f"{scheme}://", 1)
    result = Cli(typed)("db", "current")
    assert result.stdout.startswith("revision ") and result.stdout.endswith(": up to date\n")
