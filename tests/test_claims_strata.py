"""The comparing claims with jobs as strata, on runs shaped like real ones (final validation
losses of GPT-2 124M, seed sd about 0.0013-0.004): jobs at different levels, a job whose own
difference is off, runs of a variant without the other in a job, rounded losses, too few
runs, a decision kept, a planned design, advice and its cost, lengths chosen on the command
line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import Cli
from tests.test_claim_kinds import compared, judge
from tracker.analysis.claims.specs import EquivalenceClaim, NoninferiorityClaim
from tracker.analysis.claims.within_jobs import summed_mann_whitney_u
from tracker.analysis.expectations import Expectations, study_expectations
from tracker.analysis.stats import mann_whitney_u
from tracker.sample import write_sample_job
from tracker.summary.run_index import run_hours

SPEEDRUN = Path(__file__).parent / "data" / "speedrun"  # real record logs, numbers only
# the demo's runs (docs/claims.md, "Worked example: the demo"), jobs 1-3 of 1 flash + 2 ref,
# jobs 4-6 of 2 + 2
DEMO_FLASH = [[3.264205], [3.265812], [3.264752], [3.266825, 3.265382],
              [3.265540, 3.265722], [3.265232, 3.263484]]  # fmt: skip
DEMO_REF = [[3.262342, 3.263486], [3.264281, 3.261344], [3.264277, 3.261860],
            [3.264082, 3.263306], [3.263682, 3.263177], [3.263903, 3.261853]]  # fmt: skip


@pytest.fixture(scope="module")
def exp() -> Expectations:
    return study_expectations("flashoptim")


def frame(cands: list[list[float]], refs: list[list[float]], **hours: float) -> pl.DataFrame:
    """Runs of jobs job1.. (``cands[j]``, ``refs[j]``: job j's flash and ref losses), in job
    order, each variant's runs of ``hours[variant]`` logged hours."""
    rows = [
        {"job": f"job{j + 1}", "arm": f"{variant}_s{i}", "variant": variant, "val_loss": v,
         "diverged": False, "steps": 2000, "stopped": None, "hours": hours.get(variant)}
        for j in range(len(cands))
        for variant, losses in (("flash", cands[j]), ("ref", refs[j]))
        for i, v in enumerate(losses)
    ]  # fmt: skip
    return pl.DataFrame(rows).with_columns(
        pl.col("stopped").cast(pl.String), pl.col("hours").cast(pl.Float64)
    )


def spec(**values: Any) -> Any:
    return compared(EquivalenceClaim, candidate="flash", **values)


def levelled(rng: np.random.Generator, jobs: int, level: float, diff: float) -> tuple[Any, Any]:
    """``jobs`` jobs of 2 + 2 runs at ``level`` nats above the demo's, flash - ref about
    ``diff`` (sd 0.0019 a job, as the issue's example)."""
    flash, ref = [], []
    for _ in range(jobs):
        base = 3.2632 + level + 0.0013 * rng.standard_normal(2)
        flash.append(list(base + diff + 0.0013 * rng.standard_normal(2)))
        ref.append(list(base + 0.0013 * rng.standard_normal(2) - 0.0013 * rng.standard_normal(2)))
    return flash, ref


def test_a_level_shared_by_both_variants_does_not_widen_the_interval(exp: Expectations) -> None:
    rng = np.random.default_rng(40)
    more_flash, more_ref = levelled(rng, 8, 0.09, 0.0022)
    (row,) = judge(exp, spec(), frame(DEMO_FLASH + more_flash, DEMO_REF + more_ref))
    assert row["status"] == "REPRODUCED"
    within = [np.mean(f) - np.mean(r) for f, r in zip(more_flash, more_ref, strict=True)]
    assert 0.0015 < row["estimate"] < 0.003  # the within-job difference, not a pooled one
    assert abs(float(np.mean(within)) - 0.0022) < 0.0015
    assert row["ci_high"] - row["ci_low"] < 0.004
    assert "since job" in row["detail"] and row["jobs_failing"] == []


def test_a_job_whose_own_difference_is_off_is_named_with_it(exp: Expectations) -> None:
    flash = [list(np.array(f) + 0.03) if j == 2 else f for j, f in enumerate(DEMO_FLASH)]
    (row,) = judge(exp, spec(), frame([*flash, [3.265, 3.2652]], [*DEMO_REF, [3.2633, 3.2629]]))
    assert row["jobs_failing"] == ["job3"]
    assert "jobs whose own difference lies beyond the margin: job3 +0.0317" in row["detail"]


def test_runs_without_the_other_variant_count_in_the_spread_only(exp: Expectations) -> None:
    flash = [*DEMO_FLASH, []]
    ref = [*DEMO_REF, [3.2700, 3.2710, 3.2690]]  # a job of ref runs alone, at its own level
    (row,) = judge(exp, spec(), frame(flash, ref))
    (alone,) = judge(exp, spec(), frame(DEMO_FLASH, DEMO_REF))
    assert row["estimate"] == pytest.approx(alone["estimate"])
    assert (
        "(3 ref runs in 1 jobs without flash: in the spread within jobs, not in the "
        in (row["detail"])
    )
    assert row["n_samples"] == alone["n_samples"] + 3


def test_too_few_runs_decide_nothing_and_rounding_floors_the_spread(exp: Expectations) -> None:
    same = [[3.28, 3.28]]
    (two,) = judge(exp, spec(), frame(same, same))
    assert two["status"] == "INCONCLUSIVE"
    assert "fewer than 3 runs of a variant in jobs with both" in two["detail"]
    assert two["next_runs"].startswith("run 1 more flash seed and 1 more ref seed in jobs with")
    # three identical losses logged to two decimals: the spread is the rounding's, not zero
    (three,) = judge(exp, spec(), frame([[3.28] * 3], [[3.28] * 3]))
    assert three["ci_high"] - three["ci_low"] > 0.005
    assert three["status"] == "INCONCLUSIVE"


def test_a_decision_is_kept_and_says_since_which_job(exp: Expectations) -> None:
    rng = np.random.default_rng(3)
    flash, ref = levelled(rng, 6, 0.0, 0.0)
    (row,) = judge(exp, spec(), frame(flash, ref))
    assert row["status"] == "REPRODUCED"
    # a later job far off would take today's interval outside; the kept decision holds
    (later,) = judge(exp, spec(), frame([*flash, [3.2901, 3.2899]], [*ref, [3.2632, 3.263]]))
    assert later["status"] == "REPRODUCED" and later["jobs_failing"] == ["job7"]
    since = row["detail"].split(" since ")[1].split(":")[0]
    assert f"since {since}:" in later["detail"]


def test_a_planned_design_is_interim_then_judged_once_on_the_first_runs(exp: Expectations) -> None:
    rng = np.random.default_rng(5)
    flash, ref = levelled(rng, 6, 0.0, 0.0)
    (interim,) = judge(exp, spec(planned_runs=8), frame(flash[:2], ref[:2]))
    assert interim["status"] == "INCONCLUSIVE" and interim["interval"] == "90% CS (interim)"
    assert interim["next_runs"] == "run the 4 flash and 4 ref runs still planned"
    (judged,) = judge(exp, spec(planned_runs=8), frame(flash[:4], ref[:4]))
    assert judged["interval"] == "90% t" and judged["n_samples"] == 16
    assert judged["status"] == "REPRODUCED"
    (after,) = judge(exp, spec(planned_runs=8), frame([*flash, [3.4, 3.4]], [*ref, [3.2, 3.2]]))
    assert (after["status"], after["ci_low"], after["ci_high"]) == (
        judged["status"],
        judged["ci_low"],
        judged["ci_high"],
    )
    assert "12 runs after the planned 8 per variant are not judged" in after["detail"]
    noisy = frame([[3.270, 3.262, 3.276]], [[3.263, 3.268, 3.259]])
    (unsettled,) = judge(exp, spec(planned_runs=3), noisy)
    assert unsettled["next_runs"].startswith("nothing: the planned 3 runs per variant left it")


def test_advice_settles_or_says_the_margin_is_too_near(exp: Expectations) -> None:
    rng = np.random.default_rng(8)
    flash, ref = levelled(rng, 2, 0.0, 0.0)
    noisy_flash = [list(np.array(f) + 0.004 * rng.standard_normal(2)) for f in flash]
    (row,) = judge(exp, spec(), frame(noisy_flash, ref, **{"flash": 0.13, "ref": 0.31}))
    assert row["status"] == "INCONCLUSIVE"  # 4 runs a variant, the flash noisier
    assert row["next_runs"].startswith(
        "run 2 more flash and 2 more ref seeds (flash about 0.13 hours a run, ref about 0.31 "
        "hours a run: 0.88 hours in all): they settle it with 80% probability if the "
        "difference within jobs is "
    )
    near = [list(np.array(f) + 0.0098) for f in flash]
    (edge,) = judge(exp, compared(NoninferiorityClaim, candidate="flash"), frame(near, ref))
    assert edge["next_runs"].startswith("the difference sits too near the margin to settle")


def test_run_hours_from_each_logged_time() -> None:
    def unasked() -> float:
        raise AssertionError("the curve is asked only where the summary gives no time")

    assert run_hours({"wall_time_s": 7200}, 100, unasked) == 2.0
    assert run_hours({"train_time_ms": 3.6e6}, 100, unasked) == 1.0
    assert run_hours({}, 100, lambda: 1800.0) == 0.5  # an elapsed-time curve's last value
    assert run_hours({"step_ms": 36.0}, 100_000, lambda: None) == 1.0
    assert run_hours({"step_ms": 36.0}, None, lambda: None) is None


def test_cli_lengths_own_compares_runs_of_unlike_lengths(cli: Cli, tmp_path: Path) -> None:
    for j, steps in enumerate((60, 80)):
        arms = ("ref_s0", "ref_s1", "ref_s2") if j == 0 else ("flash_s0", "flash_s1", "flash_s2")
        cli("ingest", str(write_sample_job(tmp_path / f"j{j}", seed=j, steps=steps, arms=arms)))

    def equivalence(*options: str) -> dict[str, Any]:
        rows = json.loads(cli("claims", "-f", "json", *options).stdout)
        (found,) = [r for r in rows if r["claim"] == "val_loss_equivalence"]
        return found

    matched = equivalence()
    assert matched["n_samples"] == 0 and "runs of unlike lengths" in matched["detail"]
    assert "80 steps" in matched["next_runs"] and "60 steps" in matched["next_runs"]
    own = equivalence("--lengths", "own")
    assert own["statement"].endswith(
        "(each at its own full length: flash at 80 steps, ref at 60 steps)"
    )
    assert own["n_samples"] == 6
    result = cli("claims", "--lengths", "mine", ok=False)
    assert result.exit_code == 2
    assert "Invalid value for '--lengths'" in result.output


def test_real_records_run_apart_are_compared_across_jobs_and_say_so(exp: Expectations) -> None:
    """Two real modded-nanogpt records (tests/data/speedrun), each a job of its own runs at
    its own length: no job to compare within."""
    rows = []
    for record in ("2025-12-18_CautiousWDAdam", "2025-12-26_LogitRescale"):
        for path in sorted((SPEEDRUN / record).glob("*.json")):
            if path.name == "job.json":
                continue
            summary = json.loads(path.read_text())
            rows.append(
                {"job": record, "arm": path.stem, "variant": path.stem.rsplit("_", 1)[0],
                 "val_loss": summary["val_loss"], "diverged": False, "steps": summary["steps"],
                 "stopped": None, "hours": summary["wall_time_s"] / 3600}
            )  # fmt: skip
    found = pl.DataFrame(rows).with_columns(pl.col("stopped").cast(pl.String))
    claim = compared(
        EquivalenceClaim, candidate="LogitRescale", baseline="CautiousWDAdam", lengths="own"
    )
    (row,) = judge(exp, claim, found)
    assert row["n_samples"] == 21 and row["n_jobs"] == 2
    assert row["statement"].endswith(
        "(each at its own full length: LogitRescale at 1,880 steps, CautiousWDAdam at 2,090 steps)"
    )
    assert "9 LogitRescale and 12 CautiousWDAdam runs over 2 jobs, none with both" in row["detail"]


def test_looking_after_every_job_within_jobs_keeps_the_level_and_the_advice_settles() -> None:
    """A small bench/bench_claims_strata.py: jobs at levels 0.05 apart, seed sd 0.004."""
    from bench.bench_claims_strata import (
        MARGIN,
        REPRODUCES,
        draw,
        ever,
        follow_advice,
        stratified_looks,
    )

    rng = np.random.default_rng(12)
    x, y = draw(rng, (300, 10), (1, 4), MARGIN, (0.012, 0.004))
    assert ever(stratified_looks(x, y), REPRODUCES) <= 0.05 + 0.02
    settled, _, cases = follow_advice(rng, 24, 0.0, (2, (2, 2)))
    assert cases >= 5 and settled >= 0.75


losses = st.lists(
    st.one_of(st.integers(300, 304).map(lambda v: v / 100), st.floats(2.5, 3.5)),
    min_size=1,
    max_size=12,
).map(np.array)  # rounded losses (ties) and unrounded ones, a job's few seeds or a dozen


@given(st.lists(st.tuples(losses, losses), max_size=30), st.booleans())
def test_the_probability_of_improvement_counts_jobs_of_like_sizes_at_once(
    groups: list[tuple[np.ndarray, np.ndarray]], nan: bool
) -> None:
    """Jobs of like sizes counted at once give each job's U statistic summed, the same
    number: ties, a NaN (a job then counted alone) and jobs past the size counted at once."""
    if nan and groups:
        groups[0][0][0] = np.nan
    assert summed_mann_whitney_u(groups) == sum(mann_whitney_u(a, b) for a, b in groups)
