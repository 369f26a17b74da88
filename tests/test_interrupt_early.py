"""A Ctrl-C early in an ingest, before any job is opened or the database is ready, still
ends in one line naming every job as not stored (exit code 130), never a bare "interrupted".
The KeyboardInterrupt is raised at the first call of a chosen function (the trace harness of
``tests.test_interrupt_anywhere``), not by a signal at some moment."""

from __future__ import annotations

from pathlib import Path

import pytest

import tracker.jobdir.source as source_module
import tracker.store.engine as engine_module
from tests.conftest import Cli
from tests.test_interrupt_anywhere import interrupt_at
from tracker.sample import write_sample_job


@pytest.mark.parametrize(
    "where",
    [source_module.open_source, engine_module.create_tracker_engine],
    ids=["opening a directory", "opening the database"],
)
def test_an_interrupt_before_storing_names_the_jobs_not_stored(
    cli: Cli, tmp_path: Path, where: object
) -> None:
    jobs = [write_sample_job(tmp_path / name, steps=10) for name in ("job0", "job1")]
    code = where.__code__  # type: ignore[attr-defined]
    with interrupt_at(lambda frame, _event: frame.f_code is code) as landed:
        result = cli("ingest", *map(str, jobs), ok=False)
    assert landed.fired
    assert (result.exit_code, result.stderr) == (130, "interrupted: job0, job1 not stored\n")
    assert cli("jobs", "-f", "csv").stdout.splitlines()[1:] == []
