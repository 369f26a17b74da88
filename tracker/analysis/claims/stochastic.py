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
from tracker.analysis.expectations import Expectations
from tracker.analysis.stats import (
    clopper_pearson,
    mann_whitney_u,
    normal_quantile,
    welch_interval,
    welch_ttest,
)
from tracker.domain import ArmName


def seeds_to_decide(diff: float, sd: float, margin: float, alpha: float, n: float) -> int | None:
    """Approximate further seeds per arm for the TOST (or its opposite) to decide with 80%
    power, from the normal approximation n = 2 (z_(1-alpha) + z_0.8)^2 sd^2 / gap^2, where
    gap is the distance of the observed difference from the nearer margin."""
    gap = abs(margin - abs(diff))
    if gap == 0 or not math.isfinite(sd):
        return None
    needed = 2 * (normal_quantile(1 - alpha) + normal_quantile(0.8)) ** 2 * sd**2 / gap**2
    return max(1, math.ceil(needed - n))


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
    """Judge ``claim`` (its status, interval and failing jobs) from two or more finite
    validation losses on each side; its detail, the numbers that decided."""
    c = exp.claims
    margin = c.val_loss_margin
    x, y = cand["val_loss"].to_numpy(), base["val_loss"].to_numpy()
    diff = float(x.mean() - y.mean())
    alpha = 1 - c.confidence
    low, high = welch_interval(x, y, c.confidence)
    claim.ci_low, claim.ci_high = low, high
    claim.interval = f"{c.confidence:.0%} Welch"
    p_lower = welch_ttest(x + margin, y, "greater").pvalue
    p_upper = welch_ttest(x - margin, y, "less").pvalue
    p_tost = max(p_lower, p_upper)
    # P(a candidate run ends below a baseline run): U of the baseline sample / (n_x n_y)
    improvement = mann_whitney_u(y, x) / (len(x) * len(y))
    boot = stratified_bootstrap(_by_job(cand), _by_job(base), exp)
    level = f"{c.confidence:.0%}"
    numbers = (
        f"difference of means {diff:+.4f} ({level} Welch interval {low:+.4f} to {high:+.4f}) "
        f"from {counts}; TOST p = {p_tost:.3g} at margin ±{margin:g}; "
        f"probability of improvement {improvement:.2f}; "
        + (
            f"{level} bootstrap interval stratified by job {boot[0]:+.4f} to {boot[1]:+.4f}"
            if boot
            else "bootstrap: every job has one run per arm, no interval"
        )
    )
    if p_tost < alpha:
        claim.status = REPRODUCED
        why = f"equivalent: the {level} interval lies within ±{margin:g}"
    elif low > margin or high < -margin:
        claim.status = NOT_REPRODUCED
        claim.jobs_failing = sorted(set(cand["job"]))
        why = f"not equivalent: the {level} interval lies entirely outside ±{margin:g}"
    else:
        sd = math.sqrt((x.var(ddof=1) + y.var(ddof=1)) / 2)
        more = seeds_to_decide(diff, sd, margin, alpha, min(len(x), len(y)))
        hint = f"; about {more} more seeds per arm would decide it" if more else ""
        why = f"the {level} interval straddles the margin ±{margin:g}{hint}"
    return f"{why}: {numbers}"


def val_loss_equivalence(runs: pl.DataFrame, exp: Expectations) -> Claim:
    """The candidate and baseline variants' final validation losses: Welch interval, TOST,
    probability of improvement and a job-stratified bootstrap interval."""
    c = exp.claims
    base_variant = _variant_of(runs, exp.training.baseline)
    cand_variant = _variant_of(runs, exp.training.candidate)
    subject = f"{cand_variant} vs {base_variant}"
    margin = c.val_loss_margin
    statement = f"{cand_variant}'s final validation loss matches {base_variant}'s within {margin:g}"
    finite = finite_rows(runs, "val_loss")
    cand = finite.filter(pl.col("variant") == cand_variant)
    base = finite.filter(pl.col("variant") == base_variant)
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
    if len(x) == 0 or len(y) == 0:
        missing = cand_variant if len(x) == 0 else base_variant
        claim.detail = f"no finite validation loss of {missing}: nothing to compare"
        return claim
    diff = float(x.mean() - y.mean())
    claim.estimate = diff
    counts = f"{len(x)} {cand_variant} and {len(y)} {base_variant} runs over {jobs} jobs"
    if len(x) < 2 or len(y) < 2:
        claim.detail = (
            f"difference of means {diff:+.4f} from {counts}: one run of an arm has no spread "
            "to judge by; at least two seeds per arm are needed"
        )
        return claim
    claim.detail = _equivalence_detail(claim, cand, base, counts, exp)
    return claim


def tracks_within_seed_noise(numbers: pl.DataFrame, exp: Expectations) -> Claim:
    """Per job, candidate EMA delta / seed-noise delta <= the factor; share of jobs within."""
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
    if n == 0:
        claim.detail = (
            f"no job has both EMA deltas ({t.candidate} and {t.seed_twin} against {t.baseline})"
        )
        return claim
    share_low, share_high = clopper_pearson(k, n, c.proportion_confidence)
    claim.estimate, claim.ci_low, claim.ci_high = k / n, share_low, share_high
    claim.jobs_failing = both.filter(~within)["job"].to_list()
    level = f"{c.proportion_confidence:.0%}"
    claim.interval = f"{level} binomial"
    median, low, high = spread(ratio)
    counts = (
        f"{k} of {n} jobs within {t.noise_factor:g}x the seed noise ({level} binomial interval "
        f"{share_low:.2f} to {share_high:.2f}); ratio median {num(median, 3)}, "
        f"range {num(low, 3)} to {num(high, 3)}"
    )
    if share_low >= c.min_share_within:
        claim.status = REPRODUCED
        why = f"the share of jobs within is at least {c.min_share_within:g}"
    elif share_high < c.min_share_within:
        claim.status = NOT_REPRODUCED
        why = f"the share of jobs within is below {c.min_share_within:g}"
    else:
        why = f"too few jobs to tell whether the share reaches {c.min_share_within:g}"
    claim.detail = f"{why}: {counts}"
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
