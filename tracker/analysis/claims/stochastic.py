"""The stochastic claims judged over the jobs: the candidate tracking the baseline within
the seed noise (the share of jobs within), the ablation diverging; and the job-stratified
bootstrap the comparing claims (tracker.analysis.claims.compare) show."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

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
from tracker.analysis.claims.next_runs import jobs_to_decide
from tracker.analysis.claims.specs import Compared, DivergesClaim, TracksClaim
from tracker.analysis.sequential import bernoulli_cs
from tracker.analysis.stats import clopper_pearson

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations


# Values redrawn at once by the bootstrap (8 bytes each, twice: the picks and the values)
RESAMPLED_VALUES = 1 << 18
# Groups of this many runs or fewer have the sum of each way to redraw them made beforehand
# (size ** size sums a group), so that a resample gathers one number a group, not size.
SUMMED_AHEAD = 3


def stratified_bootstrap(
    candidate: dict[str, np.ndarray], baseline: dict[str, np.ndarray], spec: Compared
) -> tuple[float, float] | None:
    """Percentile interval of the difference within jobs (tracker.analysis.strata: the jobs'
    differences of means, weighted by n_x n_y / (n_x + n_y)), resampling within each job.

    scipy.stats.bootstrap resamples each sample it is given on its own but has no strata,
    and passing each (job, variant) group as a sample of its own costs a Python loop per
    group (3 s for 1,000 jobs), so the resampling within groups is done here with numpy:
    each group of m runs is redrawn m times with replacement, all groups of one size at
    once; a group of one run always redraws itself. A job without both variants has no
    difference. None when no group of a job with both has two runs: it would never vary.
    """
    jobs = [job for job in candidate if job in baseline]
    weights = {
        job: len(candidate[job]) * len(baseline[job]) / (len(candidate[job]) + len(baseline[job]))
        for job in jobs
    }
    total = sum(weights.values())
    rng = np.random.default_rng(spec.bootstrap_seed)
    resamples = spec.bootstrap_resamples
    statistic = np.zeros(resamples)
    varied = False
    for groups, sign in ((candidate, 1.0), (baseline, -1.0)):
        by_size: dict[int, list[tuple[np.ndarray, float]]] = {}
        for job in jobs:
            values = groups[job]
            by_size.setdefault(len(values), []).append((values, weights[job] / total / len(values)))
        for size, same in by_size.items():
            stacked = np.stack([values for values, _ in same])  # (groups, size)
            scale = sign * np.array([coefficient for _, coefficient in same])
            if size == 1:
                statistic += float(stacked[:, 0] @ scale)
                continue
            varied = True
            drawn_sum = _redrawn_sums(stacked)
            # the resamples a slice at a time, so memory does not grow with the jobs; the
            # generator gives the same draws in slices as in one call
            step = max(1, RESAMPLED_VALUES // (len(same) * size))
            for at in range(0, resamples, step):
                picks = rng.integers(0, size, (min(step, resamples - at), len(same), size))
                statistic[at : at + step] += (drawn_sum(picks) * scale).sum(axis=1)
    if not varied:
        return None
    tail = (1 - spec.level) / 2
    low, high = np.quantile(statistic, [tail, 1 - tail])
    return float(low), float(high)


def _redrawn_sums(stacked: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """For groups of one size (``stacked``: a row each), the function from redraws (``picks``,
    the positions drawn: resamples x groups x size) to each redrawn group's sum: a sum along
    each row (a matrix product could round a row apart by how many rows BLAS is given),
    made beforehand for every way of redrawing a small group, the same numbers."""
    groups, size = stacked.shape
    if size > SUMMED_AHEAD:
        rows = np.arange(groups)[None, :, None]
        return lambda picks: stacked[rows, picks].sum(axis=2)
    ways = np.array(list(itertools.product(range(size), repeat=size)))  # (size**size, size)
    # (groups, size**size, size) summed: group g's ways at g * size**size
    sums = stacked[np.arange(groups)[:, None, None], ways].sum(axis=2).ravel()
    first = np.arange(groups) * size**size

    def drawn_sum(picks: np.ndarray) -> np.ndarray:
        way = picks[..., 0]  # the redraw's position among its group's ways, digit by digit
        for digit in range(1, size):  # not a sum along the last axis: 10x slower for so few
            way = way * size + picks[..., digit]
        return sums[way + first]

    return drawn_sum


def tracks_within_seed_noise(numbers: pl.DataFrame, spec: TracksClaim, exp: Expectations) -> Claim:
    """Per job, candidate EMA delta / seed-noise delta <= the factor; the share of jobs
    within, judged by its confidence sequence (``design = "fixed"``: its Clopper-Pearson
    interval). ``numbers`` may carry ``steps`` (the run length of the job's baseline) and
    ``stopped`` (why its roles' curves are cut short); such jobs are left out."""
    t = exp.training
    subject = f"{t.candidate} vs {t.baseline}"
    statement = (
        f"{t.candidate} tracks {t.baseline} as closely as seed {t.seed_twin} does "
        f"(EMA delta within {t.noise_factor:g}x the seed noise) in at least "
        f"{spec.min_share:.0%} of jobs"
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
        expected=spec.min_share,
    )
    roles = f"{t.candidate}, {t.baseline} and {t.seed_twin}"
    if n == 0:
        claim.detail = (
            f"no job has both EMA deltas ({t.candidate} and {t.seed_twin} against {t.baseline})"
            + tail
        )
        claim.next_runs = f"run a job with arms {roles}"
        return claim
    level = f"{spec.level:.0%}"
    cs = bernoulli_cs(k, n, spec.level)
    fixed = clopper_pearson(k, n, spec.level)
    anytime = spec.design == "anytime"
    low_end, high_end = (cs.low, cs.high) if anytime else fixed
    claim.estimate, claim.ci_low, claim.ci_high = k / n, low_end, high_end
    claim.jobs_failing = both.filter(~within)["job"].to_list()
    claim.interval = f"{level} CS" if anytime else f"{level} binomial"
    median, low, high = spread(ratio)
    found = sorted(set(both["steps"].drop_nulls())) if "steps" in both.columns else []
    lengths = "; jobs with runs of " + " and ".join(f"{s:,}" for s in found) + " steps"
    lengths = (
        "" if not found else lengths + (" pooled (a ratio of deltas)" if len(found) > 1 else "")
    )
    sequence = f"{level} confidence sequence {cs.low:.2f} to {cs.high:.2f}, valid at every look"
    binomial = f"binomial interval {fixed[0]:.2f} to {fixed[1]:.2f}"
    intervals = (
        f"{sequence}; for reference the fixed-sample {binomial}"
        if anytime
        else f"fixed design: one test on these jobs, the {level} {binomial}; for reference "
        f"the {sequence}"
    )
    counts = (
        f"{k} of {n} jobs within {t.noise_factor:g}x the seed noise ({intervals}); ratio "
        f"median {num(median, 3)}, range {num(low, 3)} to {num(high, 3)}{lengths}"
    )
    if low_end >= spec.min_share:
        claim.status = REPRODUCED
        why = f"the share of jobs within is at least {spec.min_share:g}"
    elif high_end < spec.min_share:
        claim.status = NOT_REPRODUCED
        why = f"the share of jobs within is below {spec.min_share:g}"
    else:
        why = f"too few jobs to tell whether the share reaches {spec.min_share:g}"
        more = jobs_to_decide(k, n, spec.min_share, spec.level, fixed=not anytime)
        kind = "within" if more and more[1] else "outside"
        claim.next_runs = (
            f"run {more[0]} more jobs with arms {roles} (if every one falls {kind} the seed "
            "noise; more if some do not)"
            if more
            else f"run many more jobs with arms {roles}"
        )
    claim.detail = f"{why}: {counts}{tail}"
    return claim


def ablation_diverges(
    runs: pl.DataFrame, numbers: pl.DataFrame, spec: DivergesClaim, exp: Expectations
) -> Claim:
    """In how many jobs the divergent arm diverged, and at which steps."""
    arm = spec.arm or exp.training.divergent
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
