"""The claims that compare two variants' mean of a run's final metric, judged on the runs of
every job pooled: ``equivalence`` (the difference within ± margin) and ``noninferiority``
(the candidate no worse by more than the margin); by the confidence sequence (``design =
"anytime"``) or by the one fixed-sample Welch test on the runs given (``"fixed"``), with the
other numbers (TOST, probability of improvement, a job-stratified bootstrap) for reference."""

from __future__ import annotations

import math
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
from tracker.analysis.claims.next_runs import hours, runs_to_decide
from tracker.analysis.claims.specs import Compared, NoninferiorityClaim
from tracker.analysis.claims.stochastic import stratified_bootstrap
from tracker.analysis.sequential import Interval, mean_difference_cs
from tracker.analysis.stats import mann_whitney_u, welch_interval, welch_ttest
from tracker.domain import ArmName, ClaimStatus

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

VALUE = "value"  # the compared metric's column in the runs judged here


def metric_words(metric: str) -> str:
    """How the claims' sentences name a run's final ``metric``."""
    return "validation loss" if metric == "val_loss" else metric


def _variant_of(runs: pl.DataFrame, arm: str) -> str:
    """The variant the runs give ``arm``, else the one its name gives (none for no arm name)."""
    found = runs.filter(pl.col("arm") == arm)["variant"].unique().to_list()
    if len(found) == 1:
        return str(found[0])
    name = ArmName.find(arm)
    return name.variant if name is not None else ""


def _by_job(frame: pl.DataFrame) -> dict[str, np.ndarray]:
    # a dict of lists: polars' partition_by costs about a millisecond per job
    grouped: dict[str, list[float]] = {}
    for job, value in zip(frame["job"].to_list(), frame[VALUE].to_list(), strict=True):
        grouped.setdefault(str(job), []).append(value)
    return {job: np.array(values, dtype=np.float64) for job, values in grouped.items()}


def _length_words(steps: int | None, paper: int) -> str:
    if steps is None:
        return "runs of unknown length (no 'steps' in their summaries, no points)"
    if steps == paper:
        return f"runs of {steps:,} steps, the paper's length"
    return f"runs of {steps:,} steps; the paper's number is for {paper:,}"


def _own_lengths(runs: pl.DataFrame, pair: tuple[str, str]) -> str:
    """'flash at 1,750 steps, ref at 2,000': each variant at its own full length."""
    named = []
    for variant in pair:
        steps = runs.filter(pl.col("variant") == variant)["steps"].drop_nulls()
        named.append(
            f"{variant} at {steps[0]:,} steps" if steps.len() else f"{variant} of unknown length"
        )
    return f"each at its own full length: {', '.join(named)}"


def _worse(spec: Compared) -> float:
    """+1 when a higher value of the metric is worse (a loss), -1 when it is better."""
    return -1.0 if isinstance(spec, NoninferiorityClaim) and spec.better == "higher" else 1.0


def _decide(spec: Compared, interval: Interval) -> tuple[ClaimStatus, str] | None:
    """REPRODUCED or NOT_REPRODUCED and why, from the interval of the difference (how much
    worse the candidate is, for noninferiority); None when it does not decide."""
    m, level = spec.margin, f"{spec.level:.0%}"
    what = "confidence sequence" if spec.design == "anytime" else "Welch interval"
    if isinstance(spec, NoninferiorityClaim):
        if interval.high < m:
            return REPRODUCED, f"noninferior: the {level} {what} lies below the margin {m:g}"
        if interval.low > m:
            return NOT_REPRODUCED, f"inferior: the {level} {what} lies above the margin {m:g}"
        return None
    if interval.inside(m):
        return REPRODUCED, f"equivalent: the {level} {what} lies within ±{m:g}"
    if interval.outside(m):
        return (
            NOT_REPRODUCED,
            f"not equivalent: the {level} {what} lies entirely outside ±{m:g}",
        )
    return None


def _detail(
    claim: Claim, spec: Compared, cand: pl.DataFrame, base: pl.DataFrame, counts: str
) -> str:
    """Judge ``claim`` (its status, interval, failing jobs and next runs) from two or more
    finite values on each side; its detail, the numbers that decided and the others."""
    margin, level = spec.margin, f"{spec.level:.0%}"
    sign = _worse(spec)
    x, y = sign * cand[VALUE].to_numpy(), sign * base[VALUE].to_numpy()
    diff = float(x.mean() - y.mean())
    cs = mean_difference_cs(x, y, spec.level, spec.planned_runs)
    low, high = welch_interval(x, y, spec.level)
    decided_by = cs if spec.design == "anytime" else Interval(low, high)
    claim.ci_low, claim.ci_high = decided_by.low, decided_by.high
    claim.interval = f"{level} CS" if spec.design == "anytime" else f"{level} Welch"
    # TOST at (1 - c) / 2 a side: p below it exactly when the 1 - 2 alpha Welch interval
    # lies inside the margin, the interval printed beside it
    p_lower = welch_ttest(x + margin, y, "greater").pvalue
    p_upper = welch_ttest(x - margin, y, "less").pvalue
    p_test = p_upper if isinstance(spec, NoninferiorityClaim) else max(p_lower, p_upper)
    test = "one-sided Welch test" if isinstance(spec, NoninferiorityClaim) else "TOST"
    at = f"margin {margin:g}" if isinstance(spec, NoninferiorityClaim) else f"margin ±{margin:g}"
    # P(a candidate run ends below a baseline run): U of the baseline sample / (n_x n_y)
    improvement = mann_whitney_u(y, x) / (len(x) * len(y))
    boot = stratified_bootstrap(_by_job(cand), _by_job(base), spec)
    sequence = f"{level} confidence sequence {cs.low:+.4f} to {cs.high:+.4f}, valid at every look"
    welch = f"{level} Welch interval {low:+.4f} to {high:+.4f}"
    tost = f"{test} p = {p_test:.3g} at {at} ({(1 - spec.level) / 2:g} a side)"
    worse = " (how much worse the candidate is)" if sign < 0 else ""
    if spec.design == "anytime":
        decided = f"difference of means {diff:+.4f}{worse} ({sequence}) from {counts}; "
        reference = f"for reference, the fixed-sample {welch}, {tost}; "
    else:
        decided = (
            f"difference of means {diff:+.4f}{worse} (fixed design: one test on these runs, "
            f"the {welch}, {tost}) from {counts}; "
        )
        reference = f"for reference, the {sequence}; "
    numbers = (
        decided
        + reference
        + f"probability of improvement {improvement:.2f}; "
        + (
            f"{level} bootstrap interval stratified by job {boot[0]:+.4f} to {boot[1]:+.4f}"
            if boot
            else "bootstrap: every job has one run per arm, no interval"
        )
    )
    decision = _decide(spec, decided_by)
    if decision is not None:
        claim.status, why = decision
        if claim.status == NOT_REPRODUCED:
            claim.jobs_failing = sorted(set(cand["job"]))
        return f"{why}: {numbers}"
    sd = math.sqrt((x.var(ddof=1) + y.var(ddof=1)) / 2)
    n = min(len(x), len(y))
    gap = abs(margin - diff) if isinstance(spec, NoninferiorityClaim) else abs(margin - abs(diff))
    fixed = spec.design == "fixed"
    more = runs_to_decide(gap, sd, spec.level, n, spec.planned_runs, fixed=fixed)
    variants = f"{cand['variant'][0]} and {more} more {base['variant'][0]}"
    cost = hours(finite_rows(pl.concat([cand, base]), "hours")["hours"].to_list())
    claim.next_runs = (
        f"run {more} more {variants} seeds{cost}"
        if more
        else "more runs of both variants; at this difference no count of them is sure to"
    )
    what = "confidence sequence" if spec.design == "anytime" else "Welch interval"
    bound = (
        f"the margin {margin:g}"
        if isinstance(spec, NoninferiorityClaim)
        else f"the margin ±{margin:g}"
    )
    return f"the {level} {what} straddles {bound}: {numbers}"


def judge_compared(spec: Compared, evidence: Evidence, exp: Expectations) -> list[Claim]:
    """The candidate and baseline variants' final values of the metric, judged per run length
    (``lengths = "matched"``: one claim each when the runs have several); runs that stopped
    early are left out."""
    runs = evidence.runs
    base_variant = spec.baseline or _variant_of(runs, exp.training.baseline)
    cand_variant = spec.candidate or _variant_of(runs, exp.training.candidate)
    subject = f"{cand_variant} vs {base_variant}"
    if spec.metric not in runs.columns:
        return [_no_metric(spec, subject)]
    both = finite_rows(runs.with_columns(pl.col(spec.metric).alias(VALUE)), VALUE).filter(
        pl.col("variant").is_in([cand_variant, base_variant])
    )
    stopped = both.filter(pl.col("stopped").is_not_null())
    finished = both.filter(pl.col("stopped").is_null())
    left_out = "; ".join(
        f"{job}/{arm} {message}"
        for job, arm, message in stopped.select("job", "arm", "stopped").iter_rows()
    )
    pair = (cand_variant, base_variant)
    paper = exp.training.val_loss.paper_steps
    if spec.lengths == "own":
        own = finished.filter(pl.col("steps").eq_missing(pl.col("steps").max().over("variant")))
        return [_compare(spec, own, pair, subject, _own_lengths(own, pair), left_out)]
    lengths = finished["steps"].unique(maintain_order=True).sort(nulls_last=True).to_list()
    if len(lengths) <= 1:
        steps = lengths[0] if lengths else None
        return [_compare(spec, finished, pair, subject, _length_words(steps, paper), left_out)]
    return [
        _compare(
            spec,
            finished.filter(pl.col("steps").eq_missing(steps)),
            pair,
            f"{subject}, {'unknown' if steps is None else f'{steps:,}'} steps",
            _length_words(steps, paper),
            left_out,
        )
        for steps in lengths
    ]


def _claim_name(spec: Compared) -> str:
    return f"{spec.metric}_{spec.kind}"


def _no_metric(spec: Compared, subject: str) -> Claim:
    claim = Claim(_claim_name(spec), subject, spec.statement, INCONCLUSIVE, 0, 0)
    claim.detail = f"no run of the study's jobs has a final {spec.metric!r}: nothing to compare"
    return claim


def _compare(
    spec: Compared,
    finished: pl.DataFrame,
    pair: tuple[str, str],
    subject: str,
    lengths: str,
    left_out: str,
) -> Claim:
    """The claim over the finished runs of one length."""
    cand_variant, base_variant = pair
    margin, what = spec.margin, metric_words(spec.metric)
    if isinstance(spec, NoninferiorityClaim):
        statement = (
            f"{cand_variant}'s final {what} is no worse than {base_variant}'s by more than "
            f"{margin:g} ({lengths})"
        )
    else:
        statement = (
            f"{cand_variant}'s final {what} matches {base_variant}'s within {margin:g} ({lengths})"
        )
    cand = finished.filter(pl.col("variant") == cand_variant)
    base = finished.filter(pl.col("variant") == base_variant)
    x, y = cand[VALUE].to_numpy(), base[VALUE].to_numpy()
    jobs = len(set(cand["job"]) | set(base["job"]))
    claim = Claim(
        _claim_name(spec),
        subject,
        statement,
        INCONCLUSIVE,
        jobs,
        len(x) + len(y),
        expected=0.0,
        tolerance=margin,
    )
    tail = f"; left out, stopped early: {left_out}" if left_out else ""
    if len(x) == 0 or len(y) == 0:
        missing = cand_variant if len(x) == 0 else base_variant
        claim.detail = f"no finite {what} of a finished {missing} run: nothing to compare{tail}"
        claim.next_runs = f"run 2 {missing} seeds"
        return claim
    diff = _worse(spec) * float(x.mean() - y.mean())
    claim.estimate = diff
    counts = f"{len(x)} {cand_variant} and {len(y)} {base_variant} runs over {jobs} jobs"
    if len(x) < 2 or len(y) < 2:
        short = [(v, 2 - len(z)) for v, z in ((cand_variant, x), (base_variant, y)) if len(z) < 2]
        needed = " and ".join(f"{k} more {v} seed" for v, k in short)
        cost = hours(finite_rows(pl.concat([cand, base]), "hours")["hours"].to_list())
        claim.next_runs = f"run {needed}{cost}"
        claim.detail = (
            f"difference of means {diff:+.4f} from {counts}: one run of "
            f"{' and of '.join(v for v, _ in short)} has no spread to judge by; "
            f"at least two seeds per arm are needed{tail}"
        )
        return claim
    claim.detail = _detail(claim, spec, cand, base, counts) + tail
    return claim
