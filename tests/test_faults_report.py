"""``tracker report`` on a full disk: one ``Error:`` line, the job pages written before it
kept (and rendered again by the next run), as ``export`` does (``tests/test_faults.py``)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

from tests.conftest import Cli
from tracker.sample import write_sample_job

LIMIT = 1024 * 1024  # room for a job's pages, not for plotly.min.js (4-5 MB), written after them


def test_a_report_past_the_file_size_limit_is_one_line_and_keeps_the_pages_written(
    cli: Cli, tmp_path: Path
) -> None:
    for name, seed in (("first", 0), ("second", 1)):
        cli("ingest", str(write_sample_job(tmp_path / name, seed=seed, steps=50)))
    out = tmp_path / "report"

    def cap_file_size() -> None:  # a full disk without mount rights (RLIMIT_FSIZE: EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))

    command = [sys.executable, "-m", "tracker", "--db", cli.url, "report", "--out", str(out)]
    capped = subprocess.run(
        command, capture_output=True, text=True, timeout=900, preexec_fn=cap_file_size
    )
    assert capped.returncode == 1, capped.stderr
    assert "Traceback" not in capped.stderr
    lines = capped.stderr.splitlines()
    assert len(lines) == 1, capped.stderr
    assert lines[0].startswith(f"Error: report to {out} failed ([Errno 27] File too large")
    assert lines[0].endswith(
        "; its index.html and manifest not updated, job pages written so far are kept and"
        " rendered again by the next run"
    )
    assert (out / "first" / "index.html").is_file() and (out / "second" / "index.html").is_file()
    assert not (out / "index.html").exists()
    # a fresh folder gets an empty manifest first: the next run knows it for a report's
    assert json.loads((out / "manifest.json").read_text())["jobs"] == {}
    done = cli("report", "--out", str(out))
    assert (out / "index.html").is_file(), done.stdout
    assert sorted(json.loads((out / "manifest.json").read_text())["jobs"]) == ["first", "second"]
