"""The claim kinds a study file picks, judged on runs shaped like real ones (final validation
losses of GPT-2 124M seeds, sd about 0.003): the comparing kinds' designs and lengths, the
tracking claim's fixed design, and a study that lists a kind judging exactly it."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats

from tracker.analysis.claims.judge import judge_claims
from tracker.analysis.claims.specs import (
    EquivalenceClaim,
    NoninferiorityClaim,
    TracksClaim,
)
from tracker.analysis.expectations import Expectations, study_expectations

REF = [3.2631, 3.2662, 3.2609, 3.2648, 3.2625, 3.2671]
FAST = [3.2652, 3.2688, 3.2630, 3.2669, 3.2641, 3.2690]


@pytest.fixture(scope="module")
def exp() -> Expectations:
    return study_expectations("flashoptim")


def runs(groups: dict[tuple[str, int], list[float]]) -> pl.DataFrame:
    """One job per seed index; ``groups``: (variant, steps) -> final validation losses."""
    rows = [
        {"job": f"job{i + 1}", "arm": f"{variant}_s{i}", "variant": variant, "val_loss": v,
         "diverged": False, "steps": steps, "stopped": None, "hours": None}
        for (variant, steps), losses in groups.items() for i, v in enumerate(losses)
    ]  # fmt: skip
    return pl.DataFrame(rows).with_columns(
        pl.col("stopped").cast(pl.String), pl.col("hours").cast(pl.Float64)
    )


def judge(
    exp: Expectations, spec: Any, frame: pl.DataFrame, numbers: pl.DataFrame | None = None
) -> list[dict[str, Any]]:
    custom = exp.model_copy(update={"claims": (spec,)})
    empty = pl.DataFrame()
    found = judge_claims(empty, empty if numbers is None else numbers, frame, empty, custom)
    return list(found.iter_rows(named=True))


def compared(kind: type[Any], **values: Any) -> Any:
    base = {"statement": "s", "candidate": "fast", "baseline": "ref", "margin": 0.01}
    return kind.model_validate({"kind": kind.model_fields["kind"].annotation.__args__[0],
                                **base, **values})  # fmt: skip


def test_lengths_own_compares_each_variant_at_its_full_length(exp: Expectations) -> None:
    frame = runs({("fast", 1750): FAST, ("ref", 2000): REF})
    (matched,) = judge(exp, compared(EquivalenceClaim), frame)
    assert matched["status"] == "INCONCLUSIVE" and matched["n_samples"] == 0
    assert matched["detail"].endswith(
        "not compared, runs of unlike lengths: fast 6 runs of 1,750 steps, "
        "ref 6 runs of 2,000 steps"
    )
    # the advice asks only for lengths a variant was run at
    assert matched["next_runs"] == (
        "run 3 ref seeds of 1,750 steps or 3 fast seeds of 2,000 steps, "
        "or compare each at its own length (--lengths own)"
    )
    (own,) = judge(exp, compared(EquivalenceClaim, lengths="own"), frame)
    assert own["subject"] == "fast vs ref"
    assert own["statement"].endswith(
        "(each at its own full length: fast at 1,750 steps, ref at 2,000 steps)"
    )
    assert own["n_samples"] == 12 and own["status"] == "REPRODUCED"


def test_the_fixed_design_is_the_one_welch_test(exp: Expectations) -> None:
    frame = runs({("fast", 2000): FAST, ("ref", 2000): REF})
    (row,) = judge(exp, compared(EquivalenceClaim, design="fixed"), frame)
    # one run of each variant per job: the jobs are pairs, the stratified interval the paired t
    low, high = stats.ttest_rel(FAST, REF).confidence_interval(0.90)
    assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert row["interval"] == "90% t"
    assert "spread between the 6 jobs' differences" in row["detail"]
    assert row["status"] == ("REPRODUCED" if low > -0.01 and high < 0.01 else "INCONCLUSIVE")


@pytest.mark.parametrize(("shift", "status"), [(0.0, "REPRODUCED"), (0.03, "NOT_REPRODUCED")])
def test_noninferiority_is_one_side_of_the_margin(
    exp: Expectations, shift: float, status: str
) -> None:
    worse = [v + shift for v in FAST]
    frame = runs({("fast", 2000): worse, ("ref", 2000): REF})
    (row,) = judge(exp, compared(NoninferiorityClaim), frame)
    assert row["claim"] == "val_loss_noninferiority" and row["status"] == status
    (higher,) = judge(exp, compared(NoninferiorityClaim, better="higher"), frame)
    assert higher["estimate"] == pytest.approx(-row["estimate"])  # how much worse: flipped


def test_tracking_with_the_fixed_design_reads_the_binomial_interval(exp: Expectations) -> None:
    numbers = pl.DataFrame(
        {"job": [f"job{i}" for i in range(1, 9)], "ema_delta": [0.01] * 8,
         "seed_noise": [0.02] * 8, "diverged_at": [None] * 8},
        schema_overrides={"diverged_at": pl.Float64},
    )  # fmt: skip
    spec = TracksClaim(kind="tracks_seed_noise", statement="s", min_share=0.25, design="fixed")
    (row,) = judge(exp, spec, runs({("ref", 2000): REF}), numbers)
    assert row["interval"] == "95% binomial"
    assert row["ci_low"] == pytest.approx(stats.binomtest(8, 8).proportion_ci(0.95).low)
    assert row["status"] == "REPRODUCED"
    assert "fixed design: one test on these jobs" in row["detail"]


def test_the_judged_kinds_are_the_listed_ones(exp: Expectations) -> None:
    frame = runs({("flash", 2000): FAST, ("ref", 2000): REF})
    listed = [spec for spec in exp.claims if spec.kind in ("equivalence", "tracks_seed_noise")]
    custom = exp.model_copy(update={"claims": tuple(listed)})
    empty = pl.DataFrame()
    numbers = pl.DataFrame(
        {"job": ["job1"], "ema_delta": [np.nan], "seed_noise": [np.nan], "diverged_at": [None]},
        schema_overrides={"diverged_at": pl.Float64},
    )
    found = judge_claims(empty, numbers, frame, empty, custom)["claim"].to_list()
    assert "ablation_diverges" not in found  # not listed: no row, not even INCONCLUSIVE
    assert found == ["val_loss_equivalence", "tracks_within_seed_noise"]
