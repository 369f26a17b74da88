"""The ``threshold`` claim: one variant's mean of a run's final metric below (or above) a
target, one row per variant. ``design = "fixed"`` is a rule written as one test on the runs
given, judged exactly so: the one-sided one-sample t test (``scipy.stats.ttest_1samp(x,
target, alternative="less")`` for "below"), REPRODUCED when p < 1 - level, NOT_REPRODUCED when
the test the other way is; ``"anytime"`` reads the one-sided ends of the mean's confidence
sequence instead, valid however often one looks (docs/claims.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from tracker.analysis.claims.common import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Claim,
    Evidence,
    finite_rows,
)
from tracker.analysis.claims.compare import metric_words
from tracker.analysis.claims.next_runs import LIMIT, hours
from tracker.analysis.claims.specs import ThresholdClaim
from tracker.analysis.sequential import boundary_factor, mean_cs, small_sample_factor
from tracker.analysis.stats import Alternative, _scipy_special, one_sample_ttest, t_quantile

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

EVERY_VARIANT = "(every variant)"  # the subject of a row about all of the study's variants


def runs_to_settle(gap: float, sd: float, spec: ThresholdClaim, n: int) -> int | None:
    """Further runs after which a mean ``gap`` from the target with per-run ``sd``, now
    ``n`` runs, would be on one side of it at the claim's level: the one-sided t bound
    (fixed) or the confidence sequence's; None when it never would or only beyond LIMIT."""
    if gap == 0 or not np.isfinite(sd) or sd <= 0:
        return None
    t = n + np.arange(1, LIMIT + 1, dtype=np.float64)
    alpha = 1 - spec.level
    if spec.design == "fixed":
        factor = _scipy_special().stdtrit(t - 1, spec.level)
    else:  # the two-sided CS at 1 - 2 alpha: alpha on each side
        factor = boundary_factor(t, 2 * alpha, spec.tuned_runs)
        factor = factor * small_sample_factor(t - 1, 2 * alpha)
    found = np.flatnonzero(sd / np.sqrt(t) * factor < gap)
    return int(found[0] + 1) if found.size else None


def _where_words(spec: ThresholdClaim) -> str:
    return ", ".join(f"{key}={value}" for key, value in (spec.where or {}).items())


def _statement(spec: ThresholdClaim, variant: str) -> str:
    scope = f"{_where_words(spec)}; " if spec.where else ""
    how = scope + (
        f"a one-sided t test at p < {1 - spec.level:g} on the runs given"
        if spec.design == "fixed"
        else f"its {spec.level:.0%} one-sided confidence sequence"
    )
    whose = "each variant's" if variant == EVERY_VARIANT else f"{variant}'s"
    return f"{whose} mean final {metric_words(spec.metric)} is {spec.side} {spec.target:g} ({how})"


def _judge(claim: Claim, spec: ThresholdClaim, x: np.ndarray, words: str, cost: str) -> str:
    """Decide ``claim`` from two or more values; its detail."""
    alpha, target = 1 - spec.level, spec.target
    toward: Alternative = "less" if spec.side == "below" else "greater"
    away: Alternative = "greater" if spec.side == "below" else "less"
    mean, sd, n = float(x.mean()), float(x.std(ddof=1)), len(x)
    test = one_sample_ttest(x, target, toward)
    other = one_sample_ttest(x, target, away)
    bound = t_quantile(spec.level, n - 1) * sd / np.sqrt(n)
    cs = mean_cs(x, 1 - 2 * alpha, spec.tuned_runs)
    numbers = (
        f"{words}; one-sided t test against {target:g}: t = {test.statistic:.3f}, "
        f"p = {test.pvalue:.3g}"
    )
    sequence = f"{1 - 2 * alpha:.0%} confidence sequence {cs.low:.4f} to {cs.high:.4f}"
    if spec.design == "fixed":
        claim.ci_low, claim.ci_high = mean - bound, mean + bound
        claim.interval = f"{spec.level:.0%} one-sided t bounds"
        there, back = test.pvalue < alpha, other.pvalue < alpha
        rule = f"fixed design: one test on the runs given, REPRODUCED when p < {alpha:g}"
        numbers += f" ({rule}); for reference, the {sequence}"
    else:
        claim.ci_low, claim.ci_high = cs.low, cs.high
        claim.interval = f"{1 - 2 * alpha:.0%} CS"
        there = cs.high < target if spec.side == "below" else cs.low > target
        back = cs.low > target if spec.side == "below" else cs.high < target
        numbers = (
            f"{words}; the {sequence}, valid at every look, one-sided ends at "
            f"{spec.level:.0%}; for reference, one-sided t test p = {test.pvalue:.3g}"
        )
    if there:
        claim.status = REPRODUCED
        return f"the mean is {spec.side} {target:g} at {spec.level:.0%}: {numbers}"
    if back:
        claim.status = NOT_REPRODUCED
        other_side = "above" if spec.side == "below" else "below"
        return (
            f"the mean is {other_side} {target:g} at {spec.level:.0%} (p = "
            f"{other.pvalue:.3g} the other way): {numbers}"
        )
    more = runs_to_settle(abs(mean - target), sd, spec, n)
    claim.next_runs = (
        f"run {more} more {claim.subject} run{'s' if more > 1 else ''}{cost}, if they look "
        "like these (the same mean and spread)"
        if more
        else f"more {claim.subject} runs; at this mean no count of them is sure to settle it"
    )
    return f"not settled at {spec.level:.0%}: {numbers}"


def _variant_claim(spec: ThresholdClaim, variant: str, runs: pl.DataFrame, left_out: str) -> Claim:
    words = metric_words(spec.metric)
    claim = Claim(
        f"{spec.metric}_threshold",
        variant,
        _statement(spec, variant),
        INCONCLUSIVE,
        runs["job"].n_unique(),
        runs.height,
        expected=spec.target,
    )
    tail = f"; left out, stopped early: {left_out}" if left_out else ""
    x = runs["value"].to_numpy()
    if len(x) == 0:
        claim.detail = f"no finished run of {variant} has a finite final {words}{tail}"
        claim.next_runs = f"run 2 {variant} runs"
        return claim
    claim.estimate = float(x.mean())
    steps = sorted(set(runs["steps"].drop_nulls()))
    lengths = f", runs of {' and '.join(f'{s:,}' for s in steps)} steps" if steps else ""
    cost = hours(finite_rows(runs, "hours")["hours"].to_list())
    if len(x) == 1:
        claim.detail = (
            f"mean {x[0]:.4f} from 1 run{lengths}: one run has no spread to judge by{tail}"
        )
        claim.next_runs = f"run 1 more {variant} run{cost}"
        return claim
    described = (
        f"mean {x.mean():.4f}, sd {x.std(ddof=1):.4f}, n = {len(x)} runs in "
        f"{claim.n_jobs} job{'s' if claim.n_jobs > 1 else ''}{lengths}"
    )
    claim.detail = _judge(claim, spec, x, described, cost) + tail
    return claim


def _jobs_where(meta: pl.DataFrame, where: dict[str, str]) -> list[str]:
    """The jobs whose metadata has every value of ``where``."""
    if meta.height == 0:
        return []
    found = None
    for key, value in where.items():
        jobs = set(meta.filter((pl.col("key") == key) & (pl.col("value") == value))["job"])
        found = jobs if found is None else found & jobs
    return sorted(found or ())


def judge_threshold(spec: ThresholdClaim, evidence: Evidence, exp: Expectations) -> list[Claim]:
    """One row per variant the claim names (else per variant the jobs ran); a variant or a
    metric no run has is a row that says so."""
    runs = evidence.runs
    if spec.where:
        runs = runs.filter(pl.col("job").is_in(_jobs_where(evidence.meta, spec.where)))
    named = (
        list(spec.variants)
        if spec.variants
        else runs["variant"].unique(maintain_order=True).to_list()
    )
    scope = f" with {_where_words(spec)}" if spec.where else ""
    if not named or spec.metric not in runs.columns:
        missing = (
            f"no job of the study{scope} has a run"
            if not named
            else f"no run of the study's jobs has a final {spec.metric!r}"
        )
        return [
            Claim(
                f"{spec.metric}_threshold",
                variant,
                _statement(spec, variant),
                INCONCLUSIVE,
                0,
                0,
                expected=spec.target,
                detail=missing,
            )
            for variant in named or [EVERY_VARIANT]
        ]
    values = finite_rows(runs.with_columns(pl.col(spec.metric).alias("value")), "value")
    claims = []
    for variant in named:
        mine = values.filter(pl.col("variant") == variant)
        if runs.filter(pl.col("variant") == variant).height == 0:
            claim = _variant_claim(spec, variant, mine, "")
            claim.detail = f"no job of the study{scope} has a run of variant {variant!r}"
            claims.append(claim)
            continue
        stopped = mine.filter(pl.col("stopped").is_not_null())
        left_out = "; ".join(
            f"{j}/{a} {m}" for j, a, m in stopped.select("job", "arm", "stopped").iter_rows()
        )
        claims.append(
            _variant_claim(spec, variant, mine.filter(pl.col("stopped").is_null()), left_out)
        )
    return claims
