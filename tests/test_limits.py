"""Bounded cost on hostile input: the limits of a job's files, linear work, bounded memory.

Each limit is refused with its exact one-line message, before the file is read whole, and
nothing is stored. Growth is asserted by counting work (the columns polars handles per
operation), never by a clock; peak memory by ``resource.getrusage`` of a child process.
Files are read in blocks: the same text cut into blocks of any size reads the same.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tracker.jobdir.curves as curves
import tracker.jobdir.probes as probes
from tests.conftest import Cli
from tests.test_parsers_property import curve_csvs, probe_documents
from tracker.errors import BadInput
from tracker.jobdir.limits import CSV_FIELD_MAX, METRIC_COLUMNS_MAX, PROBE_RECORDS_MAX
from tracker.jobdir.reader import parse_curve_csv, parse_probe_file, read_curve_csv
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.transactions import in_write_transaction

MIB = 1024 * 1024


def write_arm(directory: Path, csv_text: str | bytes, summary: str = "{}") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = csv_text.encode() if isinstance(csv_text, str) else csv_text
    (directory / "ref_s0.csv").write_bytes(data)
    (directory / "ref_s0.json").write_text(summary)
    return directory


def wide_csv(metrics: int, rows: int = 20) -> str:
    header = ["step", "loss", *(f"m{i}" for i in range(metrics - 1))]
    lines = [",".join(header)]
    lines += [",".join([str(step)] + ["0.5"] * metrics) for step in range(rows)]
    return "\n".join(lines) + "\n"


def refused(cli: Cli, *args: str) -> str:
    result = cli("ingest", *args, ok=False)
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def assert_nothing_stored(cli: Cli) -> None:
    assert cli("jobs", "--format", "csv").stdout.splitlines()[1:] == []


# -- the limits, each with its message ---------------------------------------------------------


def test_more_than_the_metric_columns_limit_is_refused(cli: Cli, tmp_path: Path) -> None:
    job = write_arm(tmp_path / "wide", wide_csv(METRIC_COLUMNS_MAX + 1))
    assert refused(cli, str(job)) == (
        f"Error: {job}: ref_s0.csv: 1001 metric columns, more than the 1000 a job may have"
    )
    assert_nothing_stored(cli)
    at_limit = write_arm(tmp_path / "at_limit", wide_csv(METRIC_COLUMNS_MAX))
    assert "1 arms, 20000 points" in cli("ingest", str(at_limit)).stdout


def test_a_field_over_the_csv_field_limit_is_refused(cli: Cli, tmp_path: Path) -> None:
    long_field = "1" * (CSV_FIELD_MAX + 3)
    job = write_arm(tmp_path / "long", f"step,loss\n0,1.0\n1,{long_field}\n")
    assert refused(cli, str(job)) == (
        f"Error: {job}: ref_s0.csv line 3: a field is longer than 131072 characters"
    )
    assert_nothing_stored(cli)


def test_a_header_longer_than_its_limit_is_refused(cli: Cli, tmp_path: Path) -> None:
    job = write_arm(tmp_path / "header", "step,loss," + ",".join(["m"] * MIB) + "\n")
    assert refused(cli, str(job)) == (
        f"Error: {job}: ref_s0.csv line 1: the header is longer than 1 MiB"
    )
    assert_nothing_stored(cli)


def probe_records(count: int) -> bytes:
    record = {"model": "gpt-125m", "variant": "ref", "error": "OOM"}
    return json.dumps([{**record, "variant": f"v{i}"} for i in range(count)]).encode()


def test_more_than_the_probe_records_limit_is_refused(cli: Cli, tmp_path: Path) -> None:
    job = tmp_path / "probes"
    job.mkdir()
    (job / "mem_sweep.json").write_bytes(probe_records(PROBE_RECORDS_MAX + 1))
    assert refused(cli, str(job)) == f"Error: {job}: mem_sweep.json: more than 100000 probe records"
    assert_nothing_stored(cli)
    lines = b"\n".join(json.dumps({"model": "m", "variant": f"v{i}"}).encode() for i in range(3))
    assert parse_probe_file("p.jsonl", lines)[2].variant == "v2"


def test_a_jsonl_line_longer_than_a_record_may_be_is_refused(cli: Cli, tmp_path: Path) -> None:
    job = tmp_path / "long_line"
    job.mkdir()
    (job / "probe.jsonl").write_text('{"model": "m", "variant": "v"}\n' + "x" * (2 * MIB))
    assert refused(cli, str(job)) == f"Error: {job}: probe.jsonl line 2: longer than 1 MiB"
    assert_nothing_stored(cli)


def test_a_file_past_max_file_size_is_refused_by_its_size(cli: Cli, tmp_path: Path) -> None:
    job = write_arm(tmp_path / "big", wide_csv(2, rows=200))
    size = (job / "ref_s0.csv").stat().st_size
    assert size > 1024
    assert refused(cli, "--max-file-size", "1KiB", str(job)) == (
        f"Error: {job}: ref_s0.csv: {size} bytes, more than --max-file-size (1 KiB)"
    )
    assert_nothing_stored(cli)
    bad = cli("ingest", "--max-file-size", "lots", str(job), ok=False)
    assert bad.exit_code == 2 and "expected a size such as 2GiB" in bad.stderr
    assert "1 arms, 400 points" in cli("ingest", "--max-file-size", "1MB", str(job)).stdout


# -- linear work in the number of columns -----------------------------------------------------

COUNTED = ("select", "with_columns", "filter", "get_column", "drop_nulls", "__getitem__")


@pytest.fixture
def column_work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], int]]:
    """The columns of the frames polars operates on, summed over operations: a select on a
    frame costs at least its width, so a select per metric on the wide frame costs columns
    squared."""
    work = [0]
    for name in COUNTED:
        original = getattr(pl.DataFrame, name)

        def counted(self: pl.DataFrame, *args: Any, _original: Any = original, **kw: Any) -> Any:
            work[0] += self.width
            return _original(self, *args, **kw)

        monkeypatch.setattr(pl.DataFrame, name, counted)
    yield lambda: work[0]


def test_many_columns_cost_work_linear_in_the_columns(
    engine: Any, tmp_path: Path, column_work: Callable[[], int]
) -> None:
    work = {}
    for metrics in (100, 400):
        job = write_arm(tmp_path / f"cols{metrics}", wide_csv(metrics))
        before = column_work()
        in_write_transaction(engine, lambda session, job=job: ingest_job(session, job))
        work[metrics] = column_work() - before
    # four times the columns: four times the work, give or take what does not grow
    assert work[400] <= 4.5 * work[100], work


def test_parsing_many_columns_costs_work_linear_in_the_columns(
    column_work: Callable[[], int],
) -> None:
    work = {}
    for metrics in (100, 400):
        data = wide_csv(metrics).encode()
        before = column_work()
        assert read_curve_csv("ref_s0.csv", data).curves.width == metrics + 1
        work[metrics] = column_work() - before
    assert work[400] <= 4.5 * work[100], work


# -- blocks: any cut reads the same ------------------------------------------------------------


def outcome(parse: Callable[[], Any]) -> Any:
    try:
        return parse()
    except BadInput as exc:
        return str(exc)


def same_frames(one: Any, other: Any) -> bool:
    if isinstance(one, str) or isinstance(other, str):
        return type(one) is type(other) and one == other
    return bool(one.equals(other))


@settings(max_examples=300, deadline=None)
@given(data=curve_csvs(), block=st.integers(1, 40))
def test_a_csv_read_in_blocks_of_any_size_reads_the_same(data: bytes, block: int) -> None:
    whole = outcome(lambda: parse_curve_csv("ref_s0.csv", data))
    original = curves.READ_BLOCK
    curves.READ_BLOCK = block
    try:
        cut = outcome(lambda: parse_curve_csv("ref_s0.csv", data))
    finally:
        curves.READ_BLOCK = original
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:  # which problem is met first depends on what was read
        assert isinstance(whole, str) == isinstance(cut, str), (whole, cut)
        return
    if '"' in text and isinstance(whole, str):
        # a quote seen only in a later block: the lines before it were counted as unquoted
        assert isinstance(cut, str), cut
        return
    assert same_frames(whole, cut), (whole, cut)


@settings(max_examples=300, deadline=None)
@given(case=probe_documents(), block=st.integers(1, 40))
def test_a_probe_file_read_in_blocks_of_any_size_reads_the_same(
    case: tuple[str, bytes], block: int
) -> None:
    filename, data = case
    whole = outcome(lambda: parse_probe_file(filename, data))
    original = probes.READ_BLOCK
    probes.READ_BLOCK = block
    try:
        cut = outcome(lambda: parse_probe_file(filename, data))
    finally:
        probes.READ_BLOCK = original
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        assert isinstance(whole, str) == isinstance(cut, str), (whole, cut)
        return
    assert whole == cut


def test_probe_messages_name_the_place_in_the_whole_file() -> None:
    records = [{"model": "m", "variant": f"v{i}", "error": "x" * 200} for i in range(9000)]
    text = json.dumps(records, indent=2)
    broken = text[: len(text) // 2] + "#" + text[len(text) // 2 :]
    try:
        json.loads(broken)
    except json.JSONDecodeError as exc:
        expected = f"malformed JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
    with pytest.raises(BadInput) as raised:
        parse_probe_file("mem_sweep.json", broken.encode())
    assert str(raised.value) == f"mem_sweep.json: {expected}"


# -- memory: a refused file costs a block, not its size ----------------------------------------

PEAK_OF_CHILD = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(done.stderr.strip().splitlines()[-1])
"""
SPARSE = 400 * MIB


def peak_of_ingest(url: str, directory: Path) -> tuple[int, int, str]:
    """Exit code, peak resident bytes and last stderr line of ``tracker ingest`` in a child
    of its own (RUSAGE_CHILDREN holds the largest child the measuring process waited for)."""
    command = [sys.executable, "-m", "tracker", "--db", url, "ingest", str(directory)]
    measured = subprocess.run(
        [sys.executable, "-c", PEAK_OF_CHILD, *command],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,  # a safety net: no verdict depends on it
    )
    first, last = measured.stdout.splitlines()
    code, kib = first.split()
    return int(code), int(kib) * 1024, last


@pytest.mark.parametrize(
    ("name", "start", "message"),
    [
        ("ref_s0.csv", b"step,loss\n0,1.0\n", "ref_s0.csv line 3: a field is longer than"),
        ("ref_s0.csv", b"", "ref_s0.csv line 1: the header is longer than 1 MiB"),
        ("mem_sweep.json", b"[", "mem_sweep.json: malformed JSON (line 1, column 2)"),
        ("ref_s0.json", b"", "ref_s0.json: malformed JSON (line 1, column 1)"),
    ],
    ids=["csv_valid_header", "csv_no_header", "mem_sweep", "arm_summary"],
)
def test_a_large_sparse_file_is_refused_at_a_small_fraction_of_its_size(
    db_url: str, tmp_path: Path, name: str, start: bytes, message: str
) -> None:
    job = write_arm(tmp_path / "sparse", "step,loss\n0,1\n")
    path = job / name
    with path.open("wb") as file:  # NUL bytes past the start, without taking disk space
        file.write(start)
        file.truncate(SPARSE)
    code, peak, last = peak_of_ingest(db_url, job)
    assert code == 1
    assert last.startswith(f"Error: {job}: {message}"), last
    assert peak < SPARSE / 2, f"peak {peak / MIB:.0f} MiB for a {SPARSE / MIB:.0f} MiB file"


def test_a_valid_job_reads_the_same_through_a_stream_as_from_bytes(tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "job", steps=300)
    data = (job / "ref_s0.csv").read_bytes()
    streamed = curves.read_curve_stream("ref_s0.csv", io.BytesIO(data), len(data))
    assert streamed.curves.equals(parse_curve_csv("ref_s0.csv", data))
    assert streamed.curves.height == 300
