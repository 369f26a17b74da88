"""The claims that compare two variants' mean of a run's final metric, judged within jobs and
combined across them (tracker.analysis.claims.within_jobs): ``equivalence`` (the difference
within ± margin) and ``noninferiority`` (the candidate no worse by more than the margin); by
the running intersection of the confidence sequence (``design = "anytime"``), by one
fixed-sample t test on the runs given (``"fixed"``) or on the first ``planned_runs`` of each
variant (a planned design), with other numbers (TOST, probability of improvement, a
job-stratified bootstrap) for reference."""

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
from tracker.analysis.claims.lengths import length_groups
from tracker.analysis.claims.next_runs import MOST_RUNS, SETTLE, runs_to_settle, variant_hours
from tracker.analysis.claims.specs import MIN_RUNS, Compared, NoninferiorityClaim
from tracker.analysis.claims.stochastic import stratified_bootstrap
from tracker.analysis.claims.within_jobs import (
    CONTRADICTS,
    MIN_DF,
    REPRODUCES,
    VALUE,
    Judged,
    Strata,
    improvement_within_jobs,
    judge_looks,
    off_jobs,
    planned_subset,
    spread_words,
    strata,
)
from tracker.analysis.stats import _scipy_special
from tracker.analysis.strata import half_width, stratified
from tracker.domain import ArmName

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations


ACROSS = "all jobs"  # the one stratum of variants no job ran both of


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


def _worse(spec: Compared) -> float:
    """+1 when a higher value of the metric is worse (a loss), -1 when it is better."""
    return -1.0 if isinstance(spec, NoninferiorityClaim) and spec.better == "higher" else 1.0


def _by_job(frame: pl.DataFrame) -> dict[str, np.ndarray]:
    # a dict of lists: polars' partition_by costs about a millisecond per job
    grouped: dict[str, list[float]] = {}
    for job, value in zip(frame["job"].to_list(), frame[VALUE].to_list(), strict=True):
        grouped.setdefault(str(job), []).append(value)
    return {job: np.array(values, dtype=np.float64) for job, values in grouped.items()}


def _why(spec: Compared, decision: int, what: str) -> str:
    m, level = spec.margin, f"{spec.level:.0%}"
    if isinstance(spec, NoninferiorityClaim):
        side = "below" if decision == REPRODUCES else "above"
        word = "noninferior" if decision == REPRODUCES else "inferior"
        return f"{word}: the {level} {what} lies {side} the margin {m:g}"
    if decision == REPRODUCES:
        return f"equivalent: the {level} {what} lies within ±{m:g}"
    return f"not equivalent: the {level} {what} lies entirely outside ±{m:g}"


def _reference(spec: Compared, judged: Judged, data: Strata, cand: pl.DataFrame,
               base: pl.DataFrame) -> str:  # fmt: skip
    """The numbers beside the decision: TOST on the stratified t, the probability of
    improvement within jobs, the bootstrap stratified by job."""
    last, m = judged.last, spec.margin
    stdtr = _scipy_special().stdtr
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero spread: t is infinite
        p_low = 1 - float(stdtr(last.df, (last.estimate + m) / last.se))
        p_high = float(stdtr(last.df, (last.estimate - m) / last.se))
    noninferior = isinstance(spec, NoninferiorityClaim)
    test = "one-sided t test" if noninferior else "TOST"
    p_test = p_high if noninferior else max(p_low, p_high)
    at = f"margin {m:g}" if noninferior else f"margin ±{m:g}"
    sign = _worse(spec)  # signed so that higher is worse: a lower candidate is better
    x = _by_job(cand.with_columns(pl.col(VALUE) * sign))
    y = _by_job(base.with_columns(pl.col(VALUE) * sign))
    improvement = improvement_within_jobs(x, y)
    boot = stratified_bootstrap(x, y, spec)
    t_half = float(half_width(last, spec.level, spec.tuned_runs, anytime=False))
    fixed = f"the fixed-sample {spec.level:.0%} t interval {last.estimate - t_half:+.4f} to "
    fixed += f"{last.estimate + t_half:+.4f}"
    words = [
        f"for reference {fixed}",
        f"{test} p = {p_test:.3g} at {at} ({(1 - spec.level) / 2:g} a side)",
    ]
    if improvement is not None:
        words.append(f"probability of improvement within jobs {improvement:.2f}")
    words.append(
        f"{spec.level:.0%} bootstrap interval stratified by job {boot[0]:+.4f} to {boot[1]:+.4f}"
        if boot
        else "bootstrap: no job has two runs of a variant, no interval"
    )
    return "; ".join(words)


def _counts(cand: pl.DataFrame, base: pl.DataFrame, data: Strata, pair: tuple[str, str]) -> str:
    """'9 flash and 12 ref runs over 6 jobs', and how runs in jobs without the other
    variant are used."""
    jobs = int(((data.nx > 0) & (data.ny > 0)).sum())
    text = (
        f"{int(data.nx.sum())} {pair[0]} and {int(data.ny.sum())} {pair[1]} runs over {jobs} jobs"
    )
    alone = [
        f"{int(n[(n > 0) & (other == 0)].sum())} {name} runs in "
        f"{int(((n > 0) & (other == 0)).sum())} jobs without {other_name}"
        for n, other, name, other_name in (
            (data.nx, data.ny, pair[0], pair[1]),
            (data.ny, data.nx, pair[1], pair[0]),
        )
        if ((n > 0) & (other == 0)).any()
    ]
    if alone:
        text += f" ({'; '.join(alone)}: in the spread within jobs, not in the difference)"
    return text


def _logged(
    cand: pl.DataFrame, base: pl.DataFrame, pair: tuple[str, str]
) -> dict[str, list[float]]:
    return {
        pair[0]: finite_rows(cand, "hours")["hours"].to_list(),
        pair[1]: finite_rows(base, "hours")["hours"].to_list(),
    }


def _fill_up(claim: Claim, have: tuple[int, int], cand: pl.DataFrame, base: pl.DataFrame,
             pair: tuple[str, str]) -> None:  # fmt: skip
    """``claim.next_runs`` of a claim with fewer than MIN_RUNS runs of a variant."""
    short = {v: MIN_RUNS - n for v, n in zip(pair, have, strict=True) if n < MIN_RUNS}
    runs = " and ".join(f"{k} more {v} seed{'s' if k > 1 else ''}" for v, k in short.items())
    cost = variant_hours(short, _logged(cand, base, pair))
    claim.next_runs = f"run {runs} in jobs with both variants{cost}"


def _advice(claim: Claim, spec: Compared, data: Strata, judged: Judged, cand: pl.DataFrame,
            base: pl.DataFrame, pair: tuple[str, str], anytime: bool) -> None:  # fmt: skip
    """``claim.next_runs`` of an undecided claim: the runs per variant that settle it with
    probability SETTLE, each variant's cost at its own logged time."""
    have = (int(data.nx[data.ny > 0].sum()), int(data.ny[data.nx > 0].sum()))
    if min(have) < MIN_RUNS:
        _fill_up(claim, have, cand, base, pair)
        return
    logged = _logged(cand, base, pair)
    more = runs_to_settle(data, judged, spec, anytime=anytime)
    if more is None:
        claim.next_runs = (
            f"the difference sits too near the margin to settle with runs of this spread "
            f"({SETTLE:.0%} would need more than {MOST_RUNS} runs per variant)"
        )
        return
    cost = variant_hours(dict.fromkeys(pair, more), logged)
    claim.next_runs = (
        f"run {more} more {pair[0]} and {more} more {pair[1]} seeds{cost}: "
        f"they settle it with {SETTLE:.0%} probability if the difference within jobs is "
        f"{judged.last.estimate:+.4f} and the spread as seen"
    )


def _judge(claim: Claim, spec: Compared, cand: pl.DataFrame, base: pl.DataFrame,
           pair: tuple[str, str], later: int) -> str:  # fmt: skip
    """Judge ``claim`` from runs of both variants; its detail."""
    level = f"{spec.level:.0%}"
    planned = spec.planned_runs
    interim = planned is not None and (cand.height < planned or base.height < planned)
    anytime = interim or (planned is None and spec.design == "anytime")
    apart = not set(cand["job"]) & set(base["job"])
    if apart:  # no job to compare within: all runs as one stratum, and the row says so
        cand, base = (f.with_columns(job=pl.lit(ACROSS)) for f in (cand, base))
    data = strata(cand, base, _worse(spec))
    counts = _counts(cand, base, data, pair)
    if apart:
        counts = (
            f"{cand.height} {pair[0]} and {base.height} {pair[1]} runs over {claim.n_jobs} jobs, "
            "none with both (compared across jobs, unpaired: the jobs' levels are in the "
            "spread; judged at this look only)"
        )
    have = (int(data.nx[data.ny > 0].sum()), int(data.ny[data.nx > 0].sum()))
    if min(have) < 2:  # no spread, no interval: a one-job report imports no scipy
        estimate = float(stratified(data.looks().last(), data.floor).estimate)
        claim.estimate = estimate
        _fill_up(claim, have, cand, base, pair)
        return (
            f"difference within jobs {estimate:+.4f} from {counts}: fewer than {MIN_RUNS} runs "
            "of a variant in jobs with both: no decision from so few"
        )
    judged = judge_looks(data, spec, anytime=anytime)
    last = judged.last
    claim.estimate = None if not np.isfinite(last.estimate) else float(last.estimate)
    if not np.isfinite(last.se):
        claim.next_runs = f"run more {pair[0]} and {pair[1]} seeds in jobs with both variants"
        return f"difference within jobs {last.estimate:+.4f} from {counts}: no spread to judge by"
    claim.ci_low, claim.ci_high = judged.judged
    what = "confidence sequence" if anytime else "t interval"
    if planned is not None and not interim:
        what = f"t interval of the planned {planned} runs per variant"
    claim.interval = f"{level} CS" if anytime else f"{level} t"
    if interim:
        claim.interval += " (interim)"
    spread = spread_words(data, last, pair)
    spread = spread.replace("within jobs", "of the runs") if apart else spread
    numbers = (
        f"difference {'across' if apart else 'within'} jobs {last.estimate:+.4f}"
        f"{' (how much worse the candidate is)' if _worse(spec) < 0 else ''} from {counts} "
        f"({spread}); {_reference(spec, judged, data, cand, base)}"
    )
    if anytime and not interim:
        kept = f"running intersection {judged.judged[0]:+.4f} to {judged.judged[1]:+.4f}"
        numbers = (
            f"{level} confidence sequence at this look {judged.own[0]:+.4f} to "
            f"{judged.own[1]:+.4f}, {kept}, valid at every look; " + numbers
        )
        if judged.empty_since:
            numbers += (
                f"; the running intersection is empty since {judged.empty_since} (the sequence "
                "missed at some look): judged on this look's interval"
            )
    off = off_jobs(data, last, spec)
    claim.jobs_failing = [job for job, _ in off]
    if off:
        numbers += "; jobs whose own difference lies beyond the margin: " + ", ".join(
            f"{job} {d:+.4f}" for job, d in off
        )
    if not anytime and planned is None:
        numbers = f"fixed design: one test on these runs; {numbers}"
    if later:
        numbers += f"; {later} runs after the planned {planned} per variant are not judged"
    if interim:
        left = {v: max(planned - f.height, 0) for v, f in zip(pair, (cand, base), strict=True)}  # type: ignore[operator]
        still = " and ".join(f"{k} {v}" for v, k in left.items() if k)
        claim.next_runs = f"run the {still} runs still planned"
        return (
            f"interim: planned design of {planned} runs per variant, judged once at the "
            f"{planned}th by the fixed-sample t test; {still} runs still planned; "
            f"{level} confidence sequence {judged.own[0]:+.4f} to {judged.own[1]:+.4f}: {numbers}"
        )
    if not judged.enough:
        _advice(claim, spec, data, judged, cand, base, pair, anytime)
        return (
            f"fewer than {MIN_RUNS} runs of a variant in jobs with both"
            if min(have) < MIN_RUNS
            else f"a spread of fewer than {MIN_DF} degrees of freedom"
        ) + f": no decision from so few; {numbers}"
    if judged.decision:
        claim.status = REPRODUCED if judged.decision == REPRODUCES else NOT_REPRODUCED
        since = f" since {judged.since}" if anytime and not apart else ""
        kept = "running intersection of the " if anytime else ""
        assert judged.decision in (REPRODUCES, CONTRADICTS)
        return f"{_why(spec, judged.decision, kept + what)}{since}: {numbers}"
    if planned is not None:  # judged once: more runs change nothing
        claim.next_runs = (
            f"nothing: the planned {planned} runs per variant left it unsettled, and later "
            "runs are not judged (a new plan needs new runs)"
        )
    else:
        _advice(claim, spec, data, judged, cand, base, pair, anytime)
    bound = f"the margin {'' if isinstance(spec, NoninferiorityClaim) else '±'}{spec.margin:g}"
    return f"the {level} {what} straddles {bound}: {numbers}"


def judge_compared(spec: Compared, evidence: Evidence, exp: Expectations) -> list[Claim]:
    """The candidate and baseline variants' final values of the metric, judged per run length
    (``lengths = "matched"``: one claim per length both variants ran) or each variant at its
    own full length; runs that stopped early are left out."""
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
    return [
        _compare(spec, group.runs, pair, group.subject(subject), group.words, left_out, group)
        for group in length_groups(finished, spec.lengths, pair, paper)
    ]


def _claim_name(spec: Compared) -> str:
    return f"{spec.metric}_{spec.kind}"


def _no_metric(spec: Compared, subject: str) -> Claim:
    claim = Claim(_claim_name(spec), subject, spec.statement, INCONCLUSIVE, 0, 0)
    claim.detail = f"no run of the study's jobs has a final {spec.metric!r}: nothing to compare"
    return claim


def _statement(spec: Compared, pair: tuple[str, str], lengths: str) -> str:
    what, margin = metric_words(spec.metric), spec.margin
    plan = f"; planned: {spec.planned_runs} runs per variant" if spec.planned_runs else ""
    if isinstance(spec, NoninferiorityClaim):
        return (
            f"{pair[0]}'s final {what} is no worse than {pair[1]}'s by more than "
            f"{margin:g} ({lengths}{plan})"
        )
    return f"{pair[0]}'s final {what} matches {pair[1]}'s within {margin:g} ({lengths}{plan})"


def _compare(spec: Compared, finished: pl.DataFrame, pair: tuple[str, str], subject: str,
             lengths: str, left_out: str, group: object) -> Claim:  # fmt: skip
    """The claim over the finished runs of one length (or of each variant's own)."""
    cand_variant, base_variant = pair
    cand = finished.filter(pl.col("variant") == cand_variant)
    base = finished.filter(pl.col("variant") == base_variant)
    later = 0
    if spec.planned_runs is not None:
        planned = planned_subset(finished, spec.planned_runs)
        later = finished.height - planned.height
        cand = planned.filter(pl.col("variant") == cand_variant)
        base = planned.filter(pl.col("variant") == base_variant)
    jobs = len(set(cand["job"]) | set(base["job"]))
    claim = Claim(
        _claim_name(spec),
        subject,
        _statement(spec, pair, lengths),
        INCONCLUSIVE,
        jobs,
        cand.height + base.height,
        expected=0.0,
        tolerance=spec.margin,
    )
    tail = f"; left out, stopped early: {left_out}" if left_out else ""
    unlike = getattr(group, "unlike", "")
    tail += f"; not compared, runs of unlike lengths: {unlike}" if unlike else ""
    if cand.height == 0 or base.height == 0:
        missing = cand_variant if cand.height == 0 else base_variant
        claim.detail = (
            f"no finite {metric_words(spec.metric)} of a finished {missing} run: nothing to "
            f"compare{tail}"
        )
        claim.next_runs = getattr(group, "advice", "") or f"run {MIN_RUNS} {missing} seeds"
        return claim
    claim.detail = _judge(claim, spec, cand, base, pair, later) + tail
    return claim
