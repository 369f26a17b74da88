"""The stochastic claims, judged on the runs of every job pooled: the candidate's final
validation loss against the baseline's (Welch, TOST, a job-stratified bootstrap), the
candidate tracking the baseline within the seed noise, and the ablation diverging."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from tracker.analysis.claims.common import (
    INCONCLUSIVE,
    MIXED,
    NOT_REPRODUCED,
    RANGE,
    REPRODUCED,
    Claim,
    finite_rows,
    num,
    some_jobs,
    spread,
)
from tracker.analysis.claims.next_runs import hours, jobs_to_decide, runs_to_decide
from tracker.analysis.expectations import Expectations
from tracker.analysis.sequential import bernoulli_cs, mean_difference_cs
from tracker.analysis.stats import clopper_pearson, mann_whitney_u, welch_interval, welch_ttest
from tracker.domain import ArmName


def stratified_bootstrap(
    candidate: dict[str, np.ndarray], baseline: dict[str, np.ndarray], exp: Expectations
) -> tuple[float, float] | None:
    """Percentile interval of mean(candidate) - mean(baseline), resampling within each job.

    scipy.stats.bootstrap resamples each sample it is given on its own but has no strata,
    and passing each (job, variant) group as a sample of its own costs a Python loop per
    group (3 s for 1,000 jobs), so the resampling within groups is done here with numpy:
    each group of m runs is redrawn m times with replacement, all groups of one size at
    once; a group of one run always redraws itself. None when no group has two runs: the
    statistic would never vary.
    """
    rng = np.random.default_rng(exp.claims.bootstrap_seed)
    resamples = exp.claims.bootstrap_resamples
    statistic = np.zeros(resamples)
    varied = False
    for groups, sign in ((candidate, 1.0), (baseline, -1.0)):
        total = sum(len(values) for values in groups.values())
        by_size: dict[int, list[np.ndarray]] = {}
        for values in groups.values():
            by_size.setdefault(len(values), []).append(values)
        for size, same in by_size.items():
            stacked = np.stack(same)  # (groups, size)
            if size == 1:
                statistic += sign * stacked.sum() / total
                continue
            varied = True
            picks = rng.integers(0, size, (resamples, len(same), size))
            rows = np.arange(len(same))[None, :, None]
            statistic += sign * stacked[rows, picks].sum(axis=(1, 2)) / total
    if not varied:
        return None
    tail = (1 - exp.claims.confidence) / 2
    low, high = np.quantile(statistic, [tail, 1 - tail])
    return float(low), float(high)


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
    for job, value in zip(frame["job"].to_list(), frame["val_loss"].to_list(), strict=True):
        grouped.setdefault(str(job), []).append(value)
    return {job: np.array(values, dtype=np.float64) for job, values in grouped.items()}


def _equivalence_detail(
    claim: Claim, cand: pl.DataFrame, base: pl.DataFrame, counts: str, exp: Expectations
) -> str:
    """Judge ``claim`` (its status, interval, failing jobs and next runs) from two or more
    finite validation losses on each side by the confidence sequence; its detail, the
    numbers that decided and the fixed-sample ones for reference."""
    c = exp.claims
    margin = c.val_loss_margin
    x, y = cand["val_loss"].to_numpy(), base["val_loss"].to_numpy()
    diff = float(x.mean() - y.mean())
    level = f"{c.confidence:.0%}"
    cs = mean_difference_cs(x, y, c.confidence, c.sequential_planned_runs)
    claim.ci_low, claim.ci_high = cs.low, cs.high
    claim.interval = f"{level} CS"
    low, high = welch_interval(x, y, c.confidence)
    # TOST at (1 - c) / 2 a side: p below it exactly when the 1 - 2 alpha Welch interval
    # lies inside the margin, the interval printed beside it
    p_lower = welch_ttest(x + margin, y, "greater").pvalue
    p_upper = welch_ttest(x - margin, y, "less").pvalue
    p_tost = max(p_lower, p_upper)
    # P(a candidate run ends below a baseline run): U of the baseline sample / (n_x n_y)
    improvement = mann_whitney_u(y, x) / (len(x) * len(y))
    boot = stratified_bootstrap(_by_job(cand), _by_job(base), exp)
    numbers = (
        f"difference of means {diff:+.4f} ({level} confidence sequence {cs.low:+.4f} to "
        f"{cs.high:+.4f}, valid at every look) from {counts}; for reference, the fixed-sample "
        f"{level} Welch interval {low:+.4f} to {high:+.4f}, TOST p = {p_tost:.3g} at margin "
        f"±{margin:g} ({(1 - c.confidence) / 2:g} a side); "
        f"probability of improvement {improvement:.2f}; "
        + (
            f"{level} bootstrap interval stratified by job {boot[0]:+.4f} to {boot[1]:+.4f}"
            if boot
            else "bootstrap: every job has one run per arm, no interval"
        )
    )
    if cs.inside(margin):
        claim.status = REPRODUCED
        why = f"equivalent: the {level} confidence sequence lies within ±{margin:g}"
    elif cs.outside(margin):
        claim.status = NOT_REPRODUCED
        claim.jobs_failing = sorted(set(cand["job"]))
        why = f"not equivalent: the {level} confidence sequence lies entirely outside ±{margin:g}"
    else:
        sd = math.sqrt((x.var(ddof=1) + y.var(ddof=1)) / 2)
        n = min(len(x), len(y))
        more = runs_to_decide(diff, sd, margin, c.confidence, n, c.sequential_planned_runs)
        variants = f"{cand['variant'][0]} and {more} more {base['variant'][0]}"
        cost = hours(finite_rows(pl.concat([cand, base]), "hours")["hours"].to_list())
        claim.next_runs = (
            f"run {more} more {variants} seeds{cost}"
            if more
            else "more runs of both variants; at this difference no count of them is sure to"
        )
        why = f"the {level} confidence sequence straddles the margin ±{margin:g}"
    return f"{why}: {numbers}"


def _length_words(steps: int | None, paper: int) -> str:
    if steps is None:
        return "runs of unknown length (no 'steps' in their summaries, no points)"
    if steps == paper:
        return f"runs of {steps:,} steps, the paper's length"
    return f"runs of {steps:,} steps; the paper's number is for {paper:,}"


def val_loss_equivalence(runs: pl.DataFrame, exp: Expectations) -> list[Claim]:
    """The candidate and baseline variants' final validation losses, judged per run length
    (one claim each when the runs have several); runs that stopped early are left out."""
    base_variant = _variant_of(runs, exp.training.baseline)
    cand_variant = _variant_of(runs, exp.training.candidate)
    both = finite_rows(runs, "val_loss").filter(
        pl.col("variant").is_in([cand_variant, base_variant])
    )
    stopped = both.filter(pl.col("stopped").is_not_null())
    finished = both.filter(pl.col("stopped").is_null())
    left_out = "; ".join(
        f"{job}/{arm} {message}"
        for job, arm, message in stopped.select("job", "arm", "stopped").iter_rows()
    )
    lengths = finished["steps"].unique(maintain_order=True).sort(nulls_last=True).to_list()
    subject = f"{cand_variant} vs {base_variant}"
    if len(lengths) <= 1:
        return [_equivalence(finished, exp, subject, lengths[0] if lengths else None, left_out)]
    return [
        _equivalence(
            finished.filter(pl.col("steps").eq_missing(steps)),
            exp,
            f"{subject}, {'unknown' if steps is None else f'{steps:,}'} steps",
            steps,
            left_out,
        )
        for steps in lengths
    ]


def _equivalence(
    finished: pl.DataFrame, exp: Expectations, subject: str, steps: int | None, left_out: str
) -> Claim:
    """The equivalence claim over the finished runs of one length."""
    c = exp.claims
    cand_variant, _, base_variant = subject.partition(",")[0].partition(" vs ")
    margin = c.val_loss_margin
    statement = (
        f"{cand_variant}'s final validation loss matches {base_variant}'s within {margin:g} "
        f"({_length_words(steps, exp.training.val_loss.paper_steps)})"
    )
    cand = finished.filter(pl.col("variant") == cand_variant)
    base = finished.filter(pl.col("variant") == base_variant)
    x, y = cand["val_loss"].to_numpy(), base["val_loss"].to_numpy()
    jobs = len(set(cand["job"]) | set(base["job"]))
    claim = Claim(
        "val_loss_equivalence",
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
        claim.detail = (
            f"no finite validation loss of a finished {missing} run: nothing to compare{tail}"
        )
        claim.next_runs = f"run 2 {missing} seeds"
        return claim
    diff = float(x.mean() - y.mean())
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
    claim.detail = _equivalence_detail(claim, cand, base, counts, exp) + tail
    return claim


def tracks_within_seed_noise(numbers: pl.DataFrame, exp: Expectations) -> Claim:
    """Per job, candidate EMA delta / seed-noise delta <= the factor; the share of jobs
    within, judged by its confidence sequence. ``numbers`` may carry ``steps`` (the run
    length of the job's baseline) and ``stopped`` (why its roles' curves are cut short);
    such jobs are left out."""
    t, c = exp.training, exp.claims
    subject = f"{t.candidate} vs {t.baseline}"
    statement = (
        f"{t.candidate} tracks {t.baseline} as closely as seed {t.seed_twin} does "
        f"(EMA delta within {t.noise_factor:g}x the seed noise) in at least "
        f"{c.min_share_within:.0%} of jobs"
    )
    both = finite_rows(finite_rows(numbers, "ema_delta"), "seed_noise").filter(
        pl.col("seed_noise") > 0
    )
    stopped = both.filter(pl.col("stopped").is_not_null()) if "stopped" in both.columns else None
    tail = ""
    if stopped is not None and stopped.height:
        both = both.filter(pl.col("stopped").is_null())
        cut = "; ".join(f"{j}: {m}" for j, m in stopped.select("job", "stopped").iter_rows())
        tail = f"; left out, a run stopped early: {cut}"
    ratio = both["ema_delta"] / both["seed_noise"]
    within = ratio <= t.noise_factor
    n, k = both.height, int(within.sum())
    claim = Claim(
        "tracks_within_seed_noise",
        subject,
        statement,
        INCONCLUSIVE,
        n,
        n,
        expected=c.min_share_within,
    )
    roles = f"{t.candidate}, {t.baseline} and {t.seed_twin}"
    if n == 0:
        claim.detail = (
            f"no job has both EMA deltas ({t.candidate} and {t.seed_twin} against {t.baseline})"
            + tail
        )
        claim.next_runs = f"run a job with arms {roles}"
        return claim
    level = f"{c.proportion_confidence:.0%}"
    cs = bernoulli_cs(k, n, c.proportion_confidence)
    fixed = clopper_pearson(k, n, c.proportion_confidence)
    claim.estimate, claim.ci_low, claim.ci_high = k / n, cs.low, cs.high
    claim.jobs_failing = both.filter(~within)["job"].to_list()
    claim.interval = f"{level} CS"
    median, low, high = spread(ratio)
    found = sorted(set(both["steps"].drop_nulls())) if "steps" in both.columns else []
    lengths = "; jobs with runs of " + " and ".join(f"{s:,}" for s in found) + " steps"
    lengths = (
        "" if not found else lengths + (" pooled (a ratio of deltas)" if len(found) > 1 else "")
    )
    counts = (
        f"{k} of {n} jobs within {t.noise_factor:g}x the seed noise ({level} confidence "
        f"sequence {cs.low:.2f} to {cs.high:.2f}, valid at every look; for reference the "
        f"fixed-sample binomial interval {fixed[0]:.2f} to {fixed[1]:.2f}); ratio median "
        f"{num(median, 3)}, range {num(low, 3)} to {num(high, 3)}{lengths}"
    )
    if cs.low >= c.min_share_within:
        claim.status = REPRODUCED
        why = f"the share of jobs within is at least {c.min_share_within:g}"
    elif cs.high < c.min_share_within:
        claim.status = NOT_REPRODUCED
        why = f"the share of jobs within is below {c.min_share_within:g}"
    else:
        why = f"too few jobs to tell whether the share reaches {c.min_share_within:g}"
        more = jobs_to_decide(k, n, c.min_share_within, c.proportion_confidence)
        kind = "within" if more and more[1] else "outside"
        claim.next_runs = (
            f"run {more[0]} more jobs with arms {roles} (if every one falls {kind} the seed "
            "noise; more if some do not)"
            if more
            else f"run many more jobs with arms {roles}"
        )
    claim.detail = f"{why}: {counts}{tail}"
    return claim


def ablation_diverges(runs: pl.DataFrame, numbers: pl.DataFrame, exp: Expectations) -> Claim:
    """In how many jobs the divergent arm diverged, and at which steps."""
    arm = exp.training.divergent
    claim = Claim("ablation_diverges", arm, f"{arm} (the ablation) diverges", INCONCLUSIVE, 0, 0)
    flags = runs.filter((pl.col("arm") == arm) & pl.col("diverged").is_not_null())
    if flags.height == 0:
        claim.detail = f"no job has arm {arm} with a 'diverged' flag"
        return claim
    diverged = flags.filter(pl.col("diverged"))["job"].to_list()
    stayed = flags.filter(~pl.col("diverged"))["job"].to_list()
    n = flags.height
    claim.n_jobs = claim.n_samples = n
    claim.jobs_failing = stayed
    steps = finite_rows(numbers.filter(pl.col("job").is_in(diverged)), "diverged_at")["diverged_at"]
    claim.estimate, claim.ci_low, claim.ci_high = spread(steps)
    claim.interval = RANGE if steps.len() else None
    where = (
        f"; first non-finite loss at step median {num(claim.estimate, 6)}, "
        f"range {num(claim.ci_low, 6)} to {num(claim.ci_high, 6)}"
        if steps.len()
        else ""
    )
    if not stayed:
        claim.status, why = REPRODUCED, f"diverged in all {n} jobs"
    elif not diverged:
        claim.status, why = NOT_REPRODUCED, f"diverged in none of the {n} jobs"
    else:
        claim.status = MIXED
        why = f"diverged in {len(diverged)} of {n} jobs; not in {some_jobs(stayed)}"
    claim.detail = why + where
    return claim
