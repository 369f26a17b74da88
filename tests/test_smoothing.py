"""The smoothing real curves need (``smooth``: per step, skipping
non-finite values, debiased), against a direct loop, and on ingested jobs with a NaN streak
and a sparse curve (faithful edits of a generated job), on both backends."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tracker.analysis.expectations import load_expectations
from tracker.analysis.smoothing import ema_smooths, smooth, smooth_points
from tracker.analysis.training import DELTA_KEY
from tracker.figures.armloss import _column_percentiles, arm_across_jobs
from tracker.figures.trajectories import trajectories_figure
from tracker.models import Job
from tracker.queries.job_analysis import load_summary
from tracker.sample import write_sample_job
from tracker.summary import version
from tracker.summary.build import derive
from tracker.summary.grid import grid_curve
from tracker.summary.model import EMA_DELTA, Summary
from tracker.summary.trajectories import drawing_of_points

STEPS = 2000
ALPHA = 0.02


def direct(steps: list[float], values: list[float], alpha: float) -> list[float]:
    """The definition, one step at a time: decay (1 - alpha) ** (step gap), state untouched
    by a non-finite value, mean / weight (the debiasing)."""
    out, mean, weight, previous = [], 0.0, 0.0, None
    for step, x in zip(steps, values, strict=True):
        if not math.isfinite(x):
            out.append(math.nan)
            continue
        decay = (1 - alpha) ** (step - (step - 1 if previous is None else previous))
        mean, weight, previous = decay * mean + (1 - decay) * x, decay * weight + (1 - decay), step
        out.append(mean / weight)
    return out


def assert_same(got: np.ndarray, expected: list[float]) -> None:
    want = np.array(expected, dtype=np.float64)
    assert got.shape == want.shape
    assert (np.isnan(got) == np.isnan(want)).all()
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=0)


def loss_like(steps: np.ndarray) -> np.ndarray:
    return 3.28 + 7.7 * np.exp(-steps / 150.0) + 0.02 * np.sin(steps / 37.0)


@pytest.mark.parametrize("alpha", [0.001, 0.02, 0.3, 0.9, 1.0])
def test_dense_sparse_and_irregular_curves_match_the_loop(alpha: float) -> None:
    rng = np.random.default_rng(7)
    for steps in (
        np.arange(3000),
        np.arange(0, 9250, 125),
        np.cumsum(rng.integers(1, 400, 2000)),
    ):
        values = loss_like(steps) + 0.05 * rng.standard_normal(steps.size)
        assert_same(smooth(steps, values, alpha), direct(steps.tolist(), values.tolist(), alpha))


def test_nan_streak_is_a_gap_and_the_smoothing_resumes() -> None:
    steps = np.arange(STEPS)
    values = loss_like(steps)
    values[800:900] = np.nan
    got = smooth(steps, values, ALPHA)
    assert_same(got, direct(steps.tolist(), values.tolist(), ALPHA))
    assert np.isnan(got[800:900]).all() and np.isfinite(got[900:]).all()
    # the state carried over the gap: step 900 decays by 101 steps, not one
    assert got[900] == pytest.approx(
        (got[799] * 0.98**101 * (1 - 0.98**800) + (1 - 0.98**101) * values[900]) / (1 - 0.98**901),
        rel=1e-12,
    )


def test_leading_nan_inf_all_nan_and_empty() -> None:
    steps = np.arange(10, 20)
    values = np.array([np.nan, np.inf, 5.0, 4.0, -np.inf, 3.0, 3.0, np.nan, 2.0, 1.0])
    got = smooth(steps, values, 0.1)
    assert_same(got, direct(steps.tolist(), values.tolist(), 0.1))
    assert got[2] == 5.0  # the first finite value is itself (debiased)
    assert np.isnan(got[[0, 1, 4, 7]]).all()
    assert np.isnan(smooth(steps, np.full(10, np.nan), 0.1)).all()
    assert smooth(np.array([]), np.array([]), 0.1).shape == (0,)
    with pytest.raises(ValueError, match="alpha must be in"):
        smooth(steps, values, 0.0)


def test_large_values_and_huge_gaps_do_not_overflow() -> None:
    steps = np.array([0, 1, 10**6, 10**6 + 5, 10**9])
    values = np.array([1e300, 2e300, 3e300, 4e300, 5e300])
    assert_same(smooth(steps, values, 0.5), direct(steps.tolist(), values.tolist(), 0.5))


@given(
    every=st.integers(2, 200),
    alpha=st.floats(0.002, 0.05),
    scale=st.floats(300.0, 3000.0),
)
def test_sparse_logging_smooths_like_dense(every: int, alpha: float, scale: float) -> None:
    """A slowly varying curve logged every k steps agrees with it logged every step at the
    shared steps (once the smoothing has seen a few of its points)."""
    dense = np.arange(20 * scale)
    values = 3.0 + 7.0 * np.exp(-dense / scale)
    sparse = dense[::every]
    a = smooth(dense, values, alpha)[::every]
    b = smooth(sparse, values[::every], alpha)
    late = sparse >= 3 * every + 5 / alpha
    # both lag the curve by about 1/alpha steps; a sparse one by up to every/2 steps more
    slope = 7.0 / scale
    assert np.max(np.abs(a[late] - b[late])) <= slope * (every / 2 + 1) + 1e-9


# --- ingested jobs ----------------------------------------------------------------------


def edit_loss(csv_path: Path, edit: Any) -> None:
    """Rewrite a training CSV in place, keeping its columns: ``edit(rows)`` -> rows."""
    with csv_path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        fields, rows = reader.fieldnames, list(reader)
    assert fields is not None
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(edit(rows))


def column(csv_path: Path, name: str) -> list[float]:
    with csv_path.open(newline="") as fh:
        return [float(row[name]) for row in csv.DictReader(fh)]


def summary_of(engine: Engine, name: str) -> Summary:
    with Session(engine) as session:
        job_id = session.scalar(select(Job.id).where(Job.name == name))
        assert job_id is not None
        return load_summary(session, job_id, load_expectations(), trajectories=True)


def nan_streak(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    for row in rows:
        if 800 <= int(row["step"]) <= 899:
            row["loss"] = "nan"
    return rows


def test_nan_streak_job(cli: Cli, engine: Engine, tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "streak", seed=2, steps=STEPS, probes=False)
    edit_loss(job / "flash_s0.csv", nan_streak)
    cli("ingest", str(job))
    out = cli(
        "query", "curve", "--job", "streak", "--arm", "flash_s0", "--ema", "0.02", "-f", "json"
    )
    rows = json.loads(out.stdout)
    losses = column(job / "flash_s0.csv", "loss")
    expected = direct(list(range(STEPS)), losses, ALPHA)
    assert [r["step"] for r in rows] == list(range(STEPS))
    assert all(r["ema"] == "NaN" for r in rows[800:900])
    later = [r["ema"] for r in rows[900:]]
    assert all(isinstance(v, float) and math.isfinite(v) for v in later)
    np.testing.assert_allclose(later, expected[900:], rtol=1e-12)
    np.testing.assert_allclose([r["ema"] for r in rows[:800]], expected[:800], rtol=1e-12)

    summary = summary_of(engine, "streak")
    [verdict] = [v for v in summary.analysis.verdicts if v.check == "ema_delta_vs_seed_noise"]
    note = "flash_s0: 100 non-finite losses at steps 800-899"
    assert verdict.status == "PASS", verdict.detail
    assert isinstance(verdict.measured, float) and math.isfinite(verdict.measured)
    assert verdict.detail.endswith(f"; {note}, skipped")
    assert note in summary.analysis.notes
    numbers = derive(summary, load_expectations()).numbers
    assert numbers[EMA_DELTA] == verdict.measured
    # the seed-parity number keeps the script's formula: a NaN poisons it
    assert summary.analysis.gpt[DELTA_KEY] is None
    # the gate does not see a regression against the same job without the streak
    clean = write_sample_job(tmp_path / "clean", seed=2, steps=STEPS, probes=False)
    cli("ingest", str(clean))
    assert cli("compare", "clean", "streak", "--fail-on-regression", ok=False).exit_code == 0


def test_a_candidate_that_never_recovers_fails(cli: Cli, engine: Engine, tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "gone", seed=2, steps=STEPS, probes=False)

    def tail(rows: list[dict[str, str]]) -> list[dict[str, str]]:
        for row in rows:
            if int(row["step"]) in (1200, *range(1900, STEPS)):
                row["loss"] = "inf" if int(row["step"]) == 1200 else "nan"
        return rows

    edit_loss(job / "flash_s0.csv", tail)
    cli("ingest", str(job))
    analysis = summary_of(engine, "gone").analysis
    [verdict] = [v for v in analysis.verdicts if v.check == "ema_delta_vs_seed_noise"]
    note = "flash_s0: 101 non-finite losses at steps 1200, 1900-1999"
    assert verdict.status == "FAIL"
    assert "last loss not finite (never recovered): flash_s0" in verdict.detail
    assert verdict.detail.endswith(f"; {note}, skipped") and note in analysis.notes


def test_sparse_curve_smooths_like_the_dense_one(cli: Cli, engine: Engine, tmp_path: Path) -> None:
    dense = write_sample_job(tmp_path / "dense", seed=2, steps=STEPS, probes=False)
    sparse = write_sample_job(tmp_path / "sparse", seed=2, steps=STEPS, probes=False)
    for arm in ("ref_s0", "ref_s1", "flash_s0"):
        edit_loss(sparse / f"{arm}.csv", lambda rows: [*rows[::125], rows[-1]])
    cli("ingest", str(dense))
    cli("ingest", str(sparse))
    steps = [*range(0, STEPS, 125), STEPS - 1]
    out = cli("query", "curve", "--job", "sparse", "--arm", "ref_s0", "--ema", "0.02", "-f", "json")
    rows = json.loads(out.stdout)
    losses = column(sparse / "ref_s0.csv", "loss")
    assert [r["step"] for r in rows] == steps
    np.testing.assert_allclose([r["ema"] for r in rows], direct(steps, losses, ALPHA), rtol=1e-12)
    # the kept grid curve ends near the dense one's, not near the first loss of ~11
    ends = {}
    for name in ("dense", "sparse"):
        curve = summary_of(engine, name).curves["ref_s0"]
        ends[name] = float(curve.values[-1])
    final = column(dense / "ref_s0.csv", "loss")[-50:]
    assert abs(ends["sparse"] - ends["dense"]) < 0.05
    assert abs(ends["sparse"] - sum(final) / len(final)) < 0.1
    lines = summary_of(engine, "sparse").trajectories.lines
    [left] = [line for line in lines if line.arm == "ref_s0" and not line.right]
    assert float(left.y[-1]) == pytest.approx(ends["sparse"], rel=1e-6)


def test_rows_of_the_previous_analysis_code_are_refilled(
    cli: Cli, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows stored by other analysis code (another code digest) are ignored, then refilled
    by ``db rederive`` with the numbers of ``smooth``."""
    job = write_sample_job(tmp_path / "old", seed=2, steps=200, probes=False)
    monkeypatch.setattr(version, "CODE_DIGEST", "the code before")
    cli("ingest", str(job))
    monkeypatch.undo()
    assert (
        cli("db", "rederive").stdout == "old: rederived\n1 jobs rederived, 0 already up to date\n"
    )
    summary = summary_of(engine, "old")
    [verdict] = [v for v in summary.analysis.verdicts if v.check == "ema_delta_vs_seed_noise"]
    assert verdict.measured == summary.analysis.tracking["ema_delta"]
    assert cli("db", "rederive").stdout == "0 jobs rederived, 1 already up to date\n"


def tensorboard(values: list[float], weight: float) -> list[float]:
    """TensorBoard's smoothing as its scalar dashboard computes it (per point, debiased):
    last = last * weight + (1 - weight) * x; smoothed = last / (1 - weight ** n), n the
    finite points so far; a non-finite point is drawn as it is and leaves the state alone."""
    out, last, n = [], 0.0, 0
    for x in values:
        if not math.isfinite(x):
            out.append(math.nan)
            continue
        last = last * weight + (1 - weight) * x
        n += 1
        out.append(last / (1 - weight**n))
    return out


@given(
    st.lists(st.floats(-1e6, 1e6) | st.just(math.nan), min_size=1, max_size=300),
    st.floats(0.0, 0.99),
)
def test_smoothing_by_point_is_tensorboards(values: list[float], weight: float) -> None:
    got = smooth_points(np.array(values), 1 - weight)
    expected = np.array(tensorboard(values, weight))
    scale = max(1.0, max((abs(v) for v in values if math.isfinite(v)), default=1.0))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9 * scale)


def test_a_sparse_curve_smooths_per_step_or_per_point() -> None:
    steps = np.arange(0, 2000, 125, dtype=np.float64)  # eval every 125 steps
    values = 3.0 + np.cos(steps / 300.0)
    by_step = smooth(steps, values, 0.01)
    by_point = smooth_points(values, 0.01)
    np.testing.assert_allclose(by_step, direct(list(steps), list(values), 0.01), rtol=1e-12)
    np.testing.assert_allclose(by_point, tensorboard(list(values), 0.99), rtol=1e-12)
    # per point, 0.99 keeps 99% of the mean each eval: far smoother than 0.99 ** 125 per step
    assert np.abs(np.diff(by_point)).max() < np.abs(np.diff(by_step)).max() / 2


def test_a_loss_logged_far_apart_is_drawn_as_logged_not_as_an_ema() -> None:
    """An eval curve every 250 steps (alpha 0.02 keeps 0.98 ** 250 = 0.6% of the mean before
    a point): the figures draw its points, marked, titled by the metric; a loss logged every
    step stays an EMA."""
    exp = load_expectations()
    sparse = np.arange(0, 2001, 250)
    dense = np.arange(2000)
    assert not ema_smooths(sparse, exp.training.ema_alpha)
    assert ema_smooths(dense, exp.training.ema_alpha) and ema_smooths(sparse[:1], 0.02)
    for steps, logged, title in ((sparse, True, "loss"), (dense, False, "train loss, EMA")):
        values = 4.0 - steps / 1000 + 0.01 * np.sin(steps)
        drawing = drawing_of_points({"ref_s0": (steps, values)}, exp)
        assert drawing.lines[0].as_logged is logged
        assert np.allclose(drawing.lines[0].y, values) is logged  # an EMA lags the points
        figure = trajectories_figure(drawing, exp)
        assert figure["layout"]["yaxis"]["title"]["text"] == title
        assert figure["data"][0]["mode"] == ("lines+markers" if logged else "lines")
        curve = grid_curve(steps, values if logged else smooth(steps, values, 0.02), values)
        across = arm_across_jobs("ref_s0", {"j1": curve, "j2": curve}, exp)
        assert across["layout"]["yaxis"]["title"]["text"] == title


@given(st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.1, 0.5]))
def test_the_band_across_jobs_is_nanpercentiles_to_the_bit(seed: int, gaps: float) -> None:
    """The quartiles over jobs, the columns without a NaN taken at once: the same numbers as
    ``np.nanpercentile``, with gaps (shorter jobs), ties (rounded losses) and infinities."""
    rng = np.random.default_rng(seed)
    table = np.round(rng.normal(3, 0.5, (rng.integers(2, 40), rng.integers(1, 30))), 2)
    table[rng.random(table.shape) < gaps] = np.nan
    table.flat[rng.integers(table.size)] = rng.choice([np.inf, -np.inf, 3.0])
    table = table[:, np.isfinite(table).sum(axis=0) >= 2]
    if table.shape[1]:
        with np.errstate(all="ignore"):  # as the band draws: inf - inf between quartiles
            found = _column_percentiles(table, [25, 50, 75])
            expected = np.nanpercentile(table, [25, 50, 75], axis=0)
        assert np.array_equal(found, expected, equal_nan=True)
