"""``tracker sql`` on PostgreSQL bounds the fetch, not only the statement: a row past
``--max-bytes`` is refused by the server before it is sent, so the client never holds it
(a 900 MB value cost 2.7 GB and 47 s before); a ``DO`` block says what it is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli
from tracker.sample import write_sample_job

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
VALUE_BYTES = 160_000_000  # past the 64 MiB default of --max-bytes


@pytest.fixture
def reader(cli: Cli, tmp_path: Path, reader_url: str) -> Cli:
    cli("ingest", str(write_sample_job(tmp_path / "job1", steps=12)))
    return Cli(reader_url)


def peak_of_child_sql(reader: Cli, statement: str) -> tuple[int, list[str], int]:
    """Exit code, stderr lines and peak memory (KiB) of a `tracker sql` in a process of its
    own (RUSAGE_CHILDREN, as tests/test_limits.py measures). Its time limit is generous: a
    busy server may take long to build the value, and this is not what is tested here."""
    measure = (
        "import resource, subprocess, sys;"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);"
        "print(done.stderr, end='')"
    )
    command = [sys.executable, "-m", "tracker", "--db", reader.url, "sql", "--timeout", "900"]
    done = subprocess.run(
        [sys.executable, "-c", measure, *command, statement],
        capture_output=True,
        text=True,
        timeout=900,
    )
    first, *stderr = done.stdout.splitlines()
    code, peak_kib = (int(word) for word in first.split())
    return code, stderr, peak_kib


def test_a_value_past_max_bytes_is_never_received(reader: Cli) -> None:
    """Peak memory, not time: under half the value's size above a `tracker sql` of one small
    row. The value is made of 10 kB pieces, since PostgreSQL repeats one character slowly."""
    pieces = VALUE_BYTES // 10_000
    code, stderr, peak_kib = peak_of_child_sql(
        reader, f"SELECT 1 AS n, repeat(repeat('x', 10000), {pieces}) AS big"
    )
    assert (code, stderr) == (1, ["Error: sql: the result is larger than 64 MiB (--max-bytes)"])
    small = peak_of_child_sql(reader, "SELECT 1 AS n")
    assert small[:2] == (0, [])
    assert (peak_kib - small[2]) * 1024 < VALUE_BYTES / 2, (peak_kib, small[2])


def test_rows_under_the_limit_and_other_statements_read_as_before(reader: Cli) -> None:
    rows = reader(
        "sql", "--max-bytes", "100000", "SELECT name FROM job ORDER BY name;", "--format", "csv"
    )
    assert rows.stdout == "name\njob1\n"
    small = reader("sql", "--max-bytes", "4000", "SELECT repeat('x', 3000) AS x", "--format", "csv")
    assert small.stdout.count("x") == 3001
    refused = reader("sql", "--max-bytes", "4000", "SELECT repeat('x', 5000) AS x", ok=False)
    assert refused.stderr == "Error: sql: the result is larger than 4000 bytes (--max-bytes)\n"
    shown = reader("sql", "SHOW default_transaction_read_only", "--format", "csv")
    assert shown.stdout.startswith("default_transaction_read_only\n")


def test_a_do_block_says_it_gives_no_rows(reader: Cli) -> None:
    result = reader("sql", "DO $$ BEGIN PERFORM 1; END $$", ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: sql: the statement returns no rows (a DO block, or another command): tracker"
        " sql runs one query and shows its rows\n",
    )
