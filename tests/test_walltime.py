"""Wall time read from the right column of real logs: elapsed (``train_time_ms``), per-step
(``dt_ms``) and running-average (``step_avg_ms``) columns told apart by name and shape, one
line where the choice needs saying, no false "went backwards" warnings.

``tests/data/speedrun_log`` is two real modded-nanogpt record logs, every step (see
tests/data/README.md); the nanoGPT job is built here in the shape karpathy/nanoGPT's
``train.py`` logs (see ``nanogpt_job``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.conftest import Cli, client_for
from tracker.elapsed import Shape, TimeKind, named_kind, read_as, source_line

DATA = Path(__file__).parent / "data"
CHOSEN = "wall time from train_time_ms (elapsed time, read as logged); not read: step_avg_ms"
AVERAGE = "wall time from step_avg_ms (a running average, times the steps done)"


def last_time(cli: Cli, run: str, metric: str) -> list[float]:
    with client_for(cli.url) as client:
        answer = client.get(f"/api/plot?run={run}&metric={metric}&x=time")
    assert answer.status_code == 200, answer.text
    return answer.json()["series"][0]["times"]


def test_a_real_speedrun_log_is_timed_by_train_time_not_step_avg(cli: Cli) -> None:
    result = cli("ingest", str(DATA / "speedrun_log"))
    assert result.stdout.splitlines() == [
        "speedrun_log: ingested 0 probes (0 failed), 2 arms, 8384 points",
        f"  warning: all 2 arms: {CHOSEN} (a running average)",
    ]
    times = last_time(cli, "speedrun_log/CautiousWDAdam_s0", "val_loss")
    assert (times[0], times[1], times[-1]) == (0.0, 8.402, 127.065)  # the log's train_time
    shown = cli("query", "runs", "--where", "notes=wall_time", "--format", "csv").stdout
    assert shown.count("CautiousWDAdam_s") == 2


def test_a_running_average_alone_is_times_the_steps_done(cli: Cli, tmp_path: Path) -> None:
    job = shutil.copytree(DATA / "speedrun_log", tmp_path / "avg_only")
    for arm in ("CautiousWDAdam_s0", "CautiousWDAdam_s1"):
        frame = pl.read_csv(job / f"{arm}.csv")
        frame.drop("train_time_ms").write_csv(job / f"{arm}.csv")
    result = cli("ingest", str(job))
    assert result.stdout.splitlines()[1:] == [f"  warning: all 2 arms: {AVERAGE}"]
    times = last_time(cli, "avg_only/CautiousWDAdam_s0", "val_loss")
    assert times[-1] == pytest.approx(60.80 * 2090 / 1000)  # step_avg x steps at step 2090
    assert times[-1] == pytest.approx(127.065, rel=1e-4)


def nanogpt_job(root: Path) -> tuple[Path, float]:
    """A job as karpathy/nanoGPT's train.py (commit 3adf61e) logs it with
    config/train_shakespeare_char.py: every ``log_interval`` = 10th iteration its loss and its
    own duration ``dt`` (``time {dt*1000:.2f}ms``: iteration 0 holds torch.compile, each
    ``eval_interval`` = 250th the evaluation too), ``val_loss`` every 250, 5000 iterations.
    Numbers made in that shape; returns the directory and the run's seconds."""
    rng = np.random.default_rng(0)
    steps = np.arange(0, 5001, 10)
    dt_ms = np.round(38.0 + rng.normal(0, 1.5, steps.size), 2)
    dt_ms[steps % 250 == 0] += 1900.0  # eval_iters=200 batches of evaluation
    dt_ms[0] += 24_000.0  # torch.compile
    loss = np.round(1.0 + 3.2 * np.exp(-steps / 800) + rng.normal(0, 0.02, steps.size), 4)
    val = pl.Series(
        [f"{v:.4f}" if s % 250 == 0 else "" for s, v in zip(steps, loss + 0.05, strict=True)]
    )
    frame = pl.DataFrame({"step": steps, "loss": loss, "val_loss": val, "dt_ms": dt_ms})
    job = root / "nanogpt"
    job.mkdir()
    frame.write_csv(job / "ref_s0.csv")
    summary = {"val_loss": float(loss[-1] + 0.05), "final_loss": float(loss[-1]), "steps": 5001}
    (job / "ref_s0.json").write_text(json.dumps(summary))
    between = np.minimum(dt_ms[:-1], dt_ms[1:]) * 9  # unlogged: as the lower of their two
    return job, float(np.sum(dt_ms) + np.sum(between)) / 1000


def test_nanogpt_dt_ms_is_summed_with_no_warning(cli: Cli, tmp_path: Path) -> None:
    job, seconds = nanogpt_job(tmp_path)
    result = cli("ingest", str(job))
    assert result.stdout.splitlines()[1:] == []  # dt_ms is plain: no line, no "backwards"
    times = last_time(cli, "nanogpt/ref_s0", "loss")
    assert times[-1] == pytest.approx(seconds)
    assert 250 < seconds < 260  # 5000 steps of 38 ms, 21 evaluations of 1.9 s, a 24 s compile


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("train_time_ms", TimeKind.ELAPSED),
        ("wall_time_s", TimeKind.ELAPSED),
        ("elapsed_ms", TimeKind.ELAPSED),
        ("time", TimeKind.ELAPSED),
        ("dt_ms", TimeKind.PER_STEP),
        ("dt", TimeKind.PER_STEP),
        ("step_ms", TimeKind.PER_STEP),
        ("iter_time", TimeKind.PER_STEP),
        ("step_avg_ms", TimeKind.AVERAGE),
        ("mean_step_time", TimeKind.AVERAGE),
        ("step", None),
        ("val_loss_mean", None),
        ("lr", None),
    ],
)
def test_time_columns_are_told_by_name(name: str, kind: TimeKind | None) -> None:
    assert named_kind(name) == kind


def test_a_column_whose_name_is_unclear_is_read_by_its_shape() -> None:
    durations = Shape.of(np.array([900.0, 41.0, 40.0, 42.0, 39.0]))  # does not grow
    running = Shape.of(np.array([0.0, 50.0, 95.0, 140.0]))  # ends at its top
    assert read_as("time_ms", durations) is not None
    assert read_as("time_ms", durations).kind is TimeKind.PER_STEP  # type: ignore[union-attr]
    assert read_as("fwd_ms", running).kind is TimeKind.ELAPSED  # type: ignore[union-attr]
    assert source_line({"time_ms": durations}) == (
        "wall time from time_ms (per-step durations, summed): its shape says so, it does not grow"
    )
    assert source_line({"train_time_ms": running}) is None  # plain from its name
    assert read_as("loss", running) is None
