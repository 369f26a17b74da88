"""``tracker demo`` run again, with other steps or into another folder, swaps in its own sample
jobs, and never replaces a job that is not the demo's."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Cli
from tracker.sample import write_sample_job


def demo(cli: Cli, tmp_path: Path, steps: int, folder: str, ok: bool = True):  # type: ignore[no-untyped-def]
    out = tmp_path / f"report-{folder}"
    args = ("--steps", str(steps), "--dir", str(tmp_path / folder), "--out", str(out))
    return cli("demo", *args, ok=ok)


def points(cli: Cli) -> dict[str, int]:
    return {row["job"]: row["points"] for row in json.loads(cli("jobs", "-f", "json").stdout)}


def test_a_demo_again_replaces_its_own_jobs(cli: Cli, tmp_path: Path) -> None:
    demo(cli, tmp_path, 10, "first")
    seed_jobs = {"job4": 5 * 3 * 10, "job5": 5 * 3 * 10, "job6": 5 * 3 * 10}  # two seeds an arm
    assert points(cli) == {"job1": 4 * 3 * 10, "job2": 4 * 3 * 10, "job3": 3 * 3 * 10, **seed_jobs}
    again = demo(cli, tmp_path, 20, "second")
    assert again.stdout.splitlines()[1:4] == [
        "job1: replaced 25 probes (1 failed), 4 arms, 240 points",
        "job2: replaced 25 probes (0 failed), 4 arms, 240 points",
        "job3: replaced 25 probes (1 failed), 3 arms, 180 points",
    ]
    assert points(cli) == {
        "job1": 240,
        "job2": 240,
        "job3": 180,
        "job4": 300,
        "job5": 300,
        "job6": 300,
    }
    same = demo(cli, tmp_path, 20, "third")
    assert same.stdout.splitlines()[1] == "job1: unchanged, already ingested with identical content"


def test_a_demo_never_replaces_another_job(cli: Cli, tmp_path: Path) -> None:
    real = write_sample_job(tmp_path / "real", seed=9, steps=15, arms=("ref_s0",))
    cli("ingest", str(real), "--job", "job1", "--meta", "gpu=H100")
    result = demo(cli, tmp_path, 10, "demo", ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: job 'job1' already exists and is not one of the demo's sample jobs; run the "
        "demo on another database, e.g. tracker --db sqlite:///demo.db demo\n",
    )
    assert points(cli) == {"job1": 3 * 15}
