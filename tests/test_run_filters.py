"""``--where`` on runs as the page shows them (``steps`` is the count, ``last_step`` its own
column) and filters that refuse what they cannot answer, with one ``Error:`` line."""

from __future__ import annotations

import csv
import io

import pytest

from tests.conftest import STEPS, Cli, client_for
from tracker.errors import did_you_mean


def arms(cli: Cli, *where: str) -> list[str]:
    args = [item for condition in where for item in ("--where", condition)]
    result = cli("query", "runs", *args, "--format", "csv")
    return [f"{row['job']}/{row['arm']}" for row in csv.DictReader(io.StringIO(result.stdout))]


def test_steps_is_the_count_the_page_shows_and_last_step_its_own_column(study: Cli) -> None:
    every = arms(study)
    assert len(every) == 12
    assert arms(study, f"steps>={STEPS}") == every  # docs/notes.md's example, as /runs shows
    assert arms(study, f"last_step>={STEPS}") == []
    assert arms(study, f"last_step={STEPS - 1}") == every
    header = study("query", "runs").stdout.splitlines()[0].split()
    assert header[6:9] == ["steps", "last_step", "stopped"]


COLUMNS = (
    "run columns: seed, val_loss, final_loss, diverged, steps, last_step, min_loss, last_loss, "
    "nonfinite, notes; metadata: flashoptim, gpu, time"
)
KINDS = (
    "duplicate_steps, incomplete_line, no_data, no_val_loss, nonfinite, restarted, resumed, "
    "time_backwards, wall_time"
)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("val_loss<abc", "val_loss is a number: 'val_loss<abc' compares it with the text 'abc'"),
        ("notes=resumd", f"no note kind 'resumd'; known kinds: {KINDS}; did you mean resumed?"),
        ("notes<3", "'notes<3': notes takes = or != and a kind (notes=resumed, notes!=resumed)"),
        (
            "val_los<3.3",
            f"no run column or metadata key 'val_los'; {COLUMNS}; did you mean val_loss?",
        ),
        ("stopped=yes", f"no run column or metadata key 'stopped'; {COLUMNS}"),
        ("gpu_=A10G", f"no run column or metadata key 'gpu_'; {COLUMNS}; did you mean gpu?"),
    ],
)
def test_a_filter_it_cannot_answer_is_one_error_line(study: Cli, where: str, message: str) -> None:
    for command in (("query", "runs"), ("jobs",), ("claims",)):
        result = study(*command, "--where", where, ok=False)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", f"Error: {message}\n")
    with client_for(study.url) as client:
        answer = client.get("/api/runs", params={"where": where})
    assert (answer.status_code, answer.json()["detail"]) == (422, message)


def test_suggestions_catch_swapped_letters_and_misspelt_schemes(study: Cli) -> None:
    known = "known jobs: j1, j2, j3"
    for args, message in [
        (("show", "1j"), f"no job named '1j'; {known}; did you mean j1?"),
        (("compare", "j1", "2j"), f"no job named '2j'; {known}; did you mean j2?"),
        (
            ("ingest", "htps://host/job2"),
            "htps://host/job2: no URL scheme 'htps'; known: s3, gs, gcs, hf, az, abfs, http, "
            "https, file, memory, or a local path; did you mean https://host/job2?",
        ),
        (
            ("ingest", "s4://bucket/job2"),
            "s4://bucket/job2: no URL scheme 's4'; known: s3, gs, gcs, hf, az, abfs, http, "
            "https, file, memory, or a local path",
        ),
    ]:
        result = study(*args, ok=False)
        assert (result.exit_code, result.stderr) == (1, f"Error: {message}\n"), args
    assert did_you_mean("jbo2", [f"job{i}" for i in range(1, 7)]) == "; did you mean job2?"
    assert did_you_mean("job7", [f"job{i}" for i in range(1, 7)]) == ""
