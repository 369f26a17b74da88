"""The per-job ``val_loss`` check, and the job page that shows it, say when the compared
arms trained for different numbers of steps: a final loss depends on the run's length."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from tests.conftest import Cli, client_for
from tracker.sample import write_sample_job


def val_loss_detail(cli: Cli, job: str) -> str:
    with client_for(cli.url) as client:
        verdicts = client.get(f"/api/jobs/{job}").json()["verdicts"]
        page = client.get(f"/jobs/{job}").text
    (detail,) = [v["detail"] for v in verdicts if v["check"] == "val_loss"]
    assert detail in page.replace("&#39;", "'")  # the job page says it too
    return str(detail)


def test_the_val_loss_check_says_when_run_lengths_differ(cli: Cli, tmp_path: Path) -> None:
    same = write_sample_job(tmp_path / "same", steps=300, arms=("ref_s0", "ref_s1", "flash_s0"))
    cli("ingest", str(same))
    assert "run lengths differ" not in val_loss_detail(cli, "same")
    job = write_sample_job(tmp_path / "short", steps=300, arms=("ref_s0", "ref_s1", "flash_s0"))
    flash = pl.read_csv(job / "flash_s0.csv")
    flash.filter(pl.col("step") < 250).write_csv(job / "flash_s0.csv")  # a shorter schedule
    summary = json.loads((job / "flash_s0.json").read_text())
    (job / "flash_s0.json").write_text(json.dumps({**summary, "steps": 250}))
    cli("ingest", str(job))
    detail = val_loss_detail(cli, "short")
    assert detail.endswith("; run lengths differ: flash_s0 250 steps, ref_s0 300, ref_s1 300")
