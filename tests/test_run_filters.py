"""``--where`` on runs as the page shows them (``steps`` is the count, ``last_step`` its own
column) and filters that refuse what they cannot answer, with one ``Error:`` line."""

from __future__ import annotations

import csv
import io

from tests.conftest import STEPS, Cli


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
