"""Claims: the study's verdicts judged on every job's evidence together (docs/claims.md).

Pure statistics over polars frames; the statistics are scipy.stats': Welch's interval
(``ttest_ind(equal_var=False).confidence_interval``), the equivalence test as two one-sided
Welch tests, ``binomtest(k, n).proportion_ci`` and ``mannwhitneyu`` for the probability of
improvement, evaluated by tracker.analysis.stats with scipy.special's distribution functions
and checked against scipy.stats by tests/test_stats.py: importing scipy.stats alone takes
1.3-1.5 s, most of a one-job report. The bootstrap resamples within jobs, which scipy's does
not offer (see ``stratified_bootstrap``).

Inputs, one row per job and item, jobs already filtered and de-duplicated by the caller:

* ``verdicts``: ``job``, ``check``, ``subject``, ``measured``, ``expected``, ``tolerance``,
  ``status``, ``detail``: every job's own verdicts;
* ``numbers``: ``job``, ``ema_delta``, ``seed_noise``, ``diverged_at``;
* ``runs``: ``job``, ``arm``, ``variant``, ``val_loss``, ``diverged``;
* ``meta``: ``job``, ``key``, ``value``: to say which metadata separates failing jobs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from tracker.analysis.expectations import Expectations
from tracker.analysis.stats import (
    clopper_pearson,
    mann_whitney_u,
    normal_quantile,
    welch_interval,
    welch_ttest,
)
from tracker.analysis.verdict import FAIL, PASS

REPRODUCED, NOT_REPRODUCED, MIXED, INCONCLUSIVE = (
    "REPRODUCED",
    "NOT_REPRODUCED",
    "MIXED",
    "INCONCLUSIVE",
)
COLUMNS: dict[str, Any] = {
    "claim": pl.String,
    "subject": pl.String,
    "statement": pl.String,
    "status": pl.String,
    "n_jobs": pl.Int64,
    "n_samples": pl.Int64,
    "estimate": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "expected": pl.Float64,
    "tolerance": pl.Float64,
    "jobs_failing": pl.List(pl.String),
    "detail": pl.String,
}
# Per-job verdict checks judged job by job, and the claim each one feeds.
DETERMINISTIC = {
    "bpp_params": "bpp_params",
    "bpp_state": "bpp_state",
    "bpp_grads": "bpp_grads",
    "table4_params_gib": "table4_params",
    "table4_optim_gib": "table4_optim",
    "gpt2_124m_params_gib": "gpt2_124m_params",
    "gpt2_124m_optim_gib": "gpt2_124m_optim",
}
COMPONENT_WORDS = {
    "params": "parameters take",
    "state": "optimizer state takes",
    "grads": "gradients take",
}
UNSET = "(unset)"
TIME_KEY = "time"  # tracker.store.catalog.TIME_KEY; not imported, this module reads no database


@dataclass
class Claim:
    claim: str
    subject: str
    statement: str
    status: str
    n_jobs: int
    n_samples: int
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    expected: float | None = None
    tolerance: float | None = None
    jobs_failing: list[str] = field(default_factory=list)
    detail: str = ""


def _f(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def _jobs(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def separating_metadata(failing: Sequence[str], passing: Sequence[str], meta: pl.DataFrame) -> str:
    """'every failing job has k=v (the others: k=w)' for each metadata key whose values
    among the failing jobs are disjoint from those among the passing ones; '' if none.
    The ``time`` key is left out, and so, among three or more jobs, is a key with a different
    value for every job: it tells the jobs apart, not the failing ones from the others."""
    if not failing or not passing:
        return ""
    values: dict[str, dict[str, str]] = {}
    for job, key, value in meta.select("job", "key", "value").iter_rows():
        values.setdefault(key, {})[job] = value
    found = []
    jobs = len(failing) + len(passing)
    for key in sorted(values):
        if key == TIME_KEY or (jobs > 2 and len(set(values[key].values())) == jobs):
            continue
        bad = {values[key].get(job, UNSET) for job in failing}
        good = {values[key].get(job, UNSET) for job in passing}
        if not bad & good:
            found.append(
                f"every failing job has {key}={'/'.join(sorted(bad))} "
                f"(the others: {key}={'/'.join(sorted(good))})"
            )
    return "; ".join(found)


def _statement(claim: str, subject: str, expected: float | None, tolerance: float | None) -> str:
    exp, tol = _f(expected), _f(tolerance, 2)
    if claim.startswith("bpp_"):
        what = COMPONENT_WORDS[claim.removeprefix("bpp_")]
        return (
            f"{subject}: its {what} {exp} bytes per parameter "
            f"(± {tol}, with the fixed overhead fitted over model sizes)"
        )
    part = "parameters take" if claim.endswith("params") else "optimizer state takes"
    if claim.startswith("table4_"):
        return (
            f"Extrapolated to the paper's Table 4 model, {subject}'s {part} {exp} GiB (± {tol} GiB)"
        )
    return f"{subject}: its {part} {exp} GiB as in the paper's appendix (± {tol} GiB)"


def deterministic_claims(verdicts: pl.DataFrame, meta: pl.DataFrame) -> list[Claim]:
    """One claim per deterministic check and subject, judged job by job."""
    # a verdict without an expected value has nothing to reproduce (no analytic bytes/param)
    checked = verdicts.filter(
        pl.col("check").is_in(list(DETERMINISTIC)) & pl.col("expected").is_not_null()
    )
    # one aggregation for all of them: a filter per claim costs more than judging it
    judged = pl.col("status").is_in([PASS, FAIL])
    measured = pl.col("measured").filter(
        judged & pl.col("measured").is_not_null() & pl.col("measured").is_not_nan()
    )
    groups = checked.group_by("check", "subject", maintain_order=True).agg(
        n=judged.sum(),
        passing=pl.col("job").filter(pl.col("status") == PASS),
        failing=pl.col("job").filter(pl.col("status") == FAIL),
        median=measured.median(),
        low=measured.min(),
        high=measured.max(),
        expected=pl.col("expected").filter(judged).median(),
        expected_unjudged=pl.col("expected").median(),
        tolerance=pl.col("tolerance").filter(judged).median(),
        jobs=pl.len(),
        first_job=pl.col("job").first(),
        first_detail=pl.col("detail").first(),
    )
    claims = []
    for group in groups.iter_rows(named=True):
        name, subject = DETERMINISTIC[group["check"]], group["subject"]
        if group["n"] == 0:
            expected = _float(group["expected_unjudged"])
            claims.append(
                Claim(
                    name,
                    subject,
                    _statement(name, subject, expected, None),
                    INCONCLUSIVE,
                    0,
                    0,
                    expected=expected,
                    detail=f"no job measured it; {group['jobs']} jobs have it N/A, e.g. "
                    f"{group['first_job']}: {group['first_detail']}",
                )
            )
            continue
        passing, failing = group["passing"], group["failing"]
        expected, tolerance = _float(group["expected"]), _float(group["tolerance"])
        n = group["n"]
        if not failing:
            status, why = REPRODUCED, f"within tolerance in all {n} jobs"
        elif not passing:
            status, why = NOT_REPRODUCED, f"outside tolerance in all {n} jobs"
        else:
            status = MIXED
            why = f"outside tolerance in {len(failing)} of {n} jobs: {_jobs(failing)}"
            separated = separating_metadata(failing, passing, meta)
            why += f"; {separated}" if separated else "; no metadata key separates them"
        median, low, high = (_float(group[key]) for key in ("median", "low", "high"))
        detail = f"{why}; median {_f(median)}, range {_f(low)} to {_f(high)}"
        claims.append(
            Claim(
                name,
                subject,
                _statement(name, subject, expected, tolerance),
                status,
                n,
                n,
                median,
                low,
                high,
                expected,
                tolerance,
                failing,
                detail,
            )
        )
    return claims


def probe_failure_claims(verdicts: pl.DataFrame, meta: pl.DataFrame) -> list[Claim]:
    """Per (model, variant) whose probe failed in some job: in how many of the jobs that
    probed it (a success shows as its bytes/param verdicts)."""
    probed = verdicts.filter(pl.col("check").is_in(["bpp_params", "probe_failed"])).unique(
        ["job", "subject"], keep="last", maintain_order=True
    )
    failed_subjects = probed.filter(pl.col("check") == "probe_failed")["subject"].unique(
        maintain_order=True
    )
    claims = []
    for subject in failed_subjects.to_list():
        rows = probed.filter(pl.col("subject") == subject)
        failing = rows.filter(pl.col("check") == "probe_failed")["job"].to_list()
        passing = rows.filter(pl.col("check") != "probe_failed")["job"].to_list()
        n, k = rows.height, len(failing)
        low, high = clopper_pearson(k, n, 0.95)
        status = MIXED if passing else NOT_REPRODUCED
        detail = f"the probe failed in {k} of the {n} jobs that probed it: {_jobs(failing)}"
        separated = separating_metadata(failing, passing, meta)
        if separated:
            detail += f"; {separated}"
        claims.append(
            Claim(
                "probe_failures",
                subject,
                f"{subject} fits in the probe's GPU memory",
                status,
                n,
                n,
                k / n,
                low,
                high,
                0.0,
                None,
                failing,
                detail + "; estimate: the share of jobs where it failed (95% binomial interval)",
            )
        )
    return claims


def _float(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _spread(values: pl.Series) -> tuple[float | None, float | None, float | None]:
    """Median, minimum and maximum; None for an empty series."""
    if values.len() == 0:
        return None, None, None
    return _float(values.median()), _float(values.min()), _float(values.max())


def _finite(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    return frame.filter(pl.col(column).is_not_null() & pl.col(column).is_finite())


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
    found = runs.filter(pl.col("arm") == arm)["variant"].unique().to_list()
    return str(found[0]) if len(found) == 1 else arm.rpartition("_s")[0]


def _by_job(frame: pl.DataFrame) -> dict[str, np.ndarray]:
    # a dict of lists: polars' partition_by costs about a millisecond per job
    grouped: dict[str, list[float]] = {}
    for job, value in zip(frame["job"].to_list(), frame["val_loss"].to_list(), strict=True):
        grouped.setdefault(str(job), []).append(value)
    return {job: np.array(values, dtype=np.float64) for job, values in grouped.items()}


def val_loss_equivalence(runs: pl.DataFrame, exp: Expectations) -> Claim:
    """The candidate and baseline variants' final validation losses: Welch interval, TOST,
    probability of improvement and a job-stratified bootstrap interval."""
    c = exp.claims
    base_variant = _variant_of(runs, exp.training.baseline)
    cand_variant = _variant_of(runs, exp.training.candidate)
    subject = f"{cand_variant} vs {base_variant}"
    margin = c.val_loss_margin
    statement = f"{cand_variant}'s final validation loss matches {base_variant}'s within {margin:g}"
    finite = _finite(runs, "val_loss")
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
    alpha = 1 - c.confidence
    low, high = welch_interval(x, y, c.confidence)
    claim.ci_low, claim.ci_high = low, high
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
    claim.detail = f"{why}: {numbers}"
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
    both = _finite(_finite(numbers, "ema_delta"), "seed_noise").filter(pl.col("seed_noise") > 0)
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
    median, low, high = _spread(ratio)
    counts = (
        f"{k} of {n} jobs within {t.noise_factor:g}x the seed noise ({level} binomial interval "
        f"{share_low:.2f} to {share_high:.2f}); ratio median {_f(median, 3)}, "
        f"range {_f(low, 3)} to {_f(high, 3)}"
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
    steps = _finite(numbers.filter(pl.col("job").is_in(diverged)), "diverged_at")["diverged_at"]
    claim.estimate, claim.ci_low, claim.ci_high = _spread(steps)
    where = (
        f"; first non-finite loss at step median {_f(claim.estimate, 6)}, "
        f"range {_f(claim.ci_low, 6)} to {_f(claim.ci_high, 6)}"
        if steps.len()
        else ""
    )
    if not stayed:
        claim.status, why = REPRODUCED, f"diverged in all {n} jobs"
    elif not diverged:
        claim.status, why = NOT_REPRODUCED, f"diverged in none of the {n} jobs"
    else:
        claim.status = MIXED
        why = f"diverged in {len(diverged)} of {n} jobs; not in {_jobs(stayed)}"
    claim.detail = why + where
    return claim


def judge_claims(
    verdicts: pl.DataFrame,
    numbers: pl.DataFrame,
    runs: pl.DataFrame,
    meta: pl.DataFrame,
    exp: Expectations,
) -> pl.DataFrame:
    """Every claim over the given jobs, as COLUMNS; stochastic claims only with arms."""
    claims = deterministic_claims(verdicts, meta)
    claims += probe_failure_claims(verdicts, meta)
    if runs.height:
        claims.append(val_loss_equivalence(runs, exp))
        claims.append(tracks_within_seed_noise(numbers, exp))
        claims.append(ablation_diverges(runs, numbers, exp))
    rows = [{name: getattr(claim, name) for name in COLUMNS} for claim in claims]
    return pl.DataFrame(rows, schema=COLUMNS)
