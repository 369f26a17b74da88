"""Job metadata can change after ingest: on an identical re-ingest and with ``tracker meta``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tracker.sample import write_sample_job


@pytest.fixture
def job(cli: Cli, tmp_path: Path) -> Path:
    directory = write_sample_job(tmp_path / "job4", steps=10, arms=("ref_s0",))
    cli("ingest", str(directory), "--meta", "gpu=H100", "--meta", "flashoptim=0.1.3")
    return directory


def listed(cli: Cli) -> tuple[str, str]:
    """The job's time and metadata as ``tracker jobs`` lists them (text in its table)."""
    (row,) = json.loads(cli("jobs", "--format", "json").stdout)
    (text_row,) = csv.DictReader(io.StringIO(cli("jobs", "--format", "csv").stdout))
    text = text_row["meta"]
    assert text == " ".join(f"{key}={value}" for key, value in row["meta"].items())
    return row["time"], text


def test_identical_reingest_updates_the_metadata(cli: Cli, job: Path) -> None:
    meta = ("--meta", "gpu=A100", "--meta", "time=2026-10-15T09:00+02:00")
    result = cli("ingest", str(job), "--replace", *meta)
    assert result.stdout == (
        "job4: identical content already ingested; "
        "metadata updated: gpu=A100 time=2026-10-15T07:00:00Z\n"  # stored in UTC, as shown
    )
    assert listed(cli) == (
        "2026-10-15T07:00:00Z",
        "flashoptim=0.1.3 gpu=A100 time=2026-10-15T07:00:00Z",
    )
    again = cli("ingest", str(job), "--meta", "gpu=A100")  # nothing new: a no-op
    assert again.stdout == "job4: unchanged, already ingested with identical content\n"


def test_meta_sets_unsets_and_prints(cli: Cli, job: Path) -> None:
    assert cli("meta", "job4").stdout == "job4: flashoptim=0.1.3 gpu=H100\n"
    changed = cli("meta", "job4", "gpu=A100", "time=2026-10-15T09:00Z", "--unset", "flashoptim")
    assert changed.stdout == "job4: gpu=A100 time=2026-10-15T09:00:00Z\n"
    assert listed(cli) == ("2026-10-15T09:00:00Z", "gpu=A100 time=2026-10-15T09:00:00Z")
    same = cli("meta", "job4", "time=2026-10-15 11:00+02:00")  # the same moment: no change
    assert same.stdout == "job4: gpu=A100 time=2026-10-15T09:00:00Z\n"
    found = cli("query", "runs", "--where", "time=2026-10-15T09:00Z", "-f", "csv").stdout
    assert found.count("\njob4,") == 1  # --where matches a time as it is stored
    emptied = cli("meta", "job4", "--unset", "gpu", "--unset", "time")
    assert emptied.stdout == "job4: no metadata\n"


def test_meta_errors_change_nothing(cli: Cli, job: Path) -> None:
    cases = [
        (
            ("job4", "gpu=A100", "time=yesterday"),
            "time 'yesterday' is not an ISO 8601 date or time (e.g. 2026-11-29T14:00:00Z)",
        ),
        (
            ("job4", "--unset", "nosuch"),
            "job 'job4' has no metadata 'nosuch' to unset; its keys: flashoptim, gpu",
        ),
        (("nosuch", "gpu=A100"), "no job named 'nosuch'; known jobs: job4"),
    ]
    for args, message in cases:
        result = cli("meta", *args, ok=False)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"Error: {message}\n")
    usage = cli("meta", "job4", "gpu=A100", "--unset", "gpu", ok=False)
    assert usage.exit_code == 2 and "'gpu' is both set and unset" in usage.stderr
    bad_pair = cli("meta", "job4", "novalue", ok=False)
    assert bad_pair.exit_code == 2 and "expected KEY=VALUE, got 'novalue'" in bad_pair.stderr
    assert cli("meta", "job4").stdout == "job4: flashoptim=0.1.3 gpu=H100\n"
