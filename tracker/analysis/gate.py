"""The regression gate's yardstick: what the comparable jobs show for one check and subject,
and whether a change goes beyond it (docs/claims.md, "The regression gate").

Pure: the caller (``tracker.queries.compare``) picks the comparable jobs and passes their
values, metadata and seeds. The second job's value is judged against a one-sided prediction
bound for one more job like them, at the study's ``[gate] false_alarm``: their centre plus a
t quantile of their noise, where the noise is the seed spread within the jobs (pooled over
their runs) unless the jobs spread beyond it, then the spread between them. A job farther
from their median than ``TRIM`` noise scales is set aside (a faulty job is not the
yardstick); a metadata key that splits their levels narrows them to the judged job's group
(``tracker.analysis.gate_split``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from tracker.analysis.exact import exact_variance
from tracker.analysis.gate_split import Levels, find_split
from tracker.analysis.stats import chi2_quantile, t_quantile

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations, GateExpectations

# MAD times this estimates the standard deviation of normal data.
MAD_SCALE = 1.4826
# A rule names at most this many of the jobs that made its yardstick.
NAMED_JOBS = 12
# A comparable job farther than this many noise scales from their median is set aside.
TRIM = 4.0
# Level of the test whether the jobs' values spread beyond what their seeds explain.
HETEROGENEITY = 0.01
# A job whose own seeds spread more than this many times the typical job's (a broken run)
# is left out of the pooled seed spread: with 2 degrees of freedom a clean job does so once
# in about 1,000.
SEED_OUTLIER = 10.0


def _no_texts() -> NDArray[np.object_]:
    return np.array([], dtype=object)


def _no_values() -> NDArray[np.float64]:
    return np.array([], dtype=np.float64)


@dataclass(frozen=True)
class Yardstick:
    """The comparable jobs' values of one check and subject, with their names, and how the
    jobs were chosen (``optimizer=adamw``; empty when no key restricts them); per value,
    where known, its job's metadata (``Levels``) and its seeds' sum of squares about their
    variants' means with its degrees of freedom (a row each). Arrays, one entry per value:
    at 10,000 jobs each check of a comparison is judged against 10,000 values."""

    jobs: NDArray[np.object_] = field(default_factory=_no_texts)
    values: NDArray[np.float64] = field(default_factory=_no_values)
    scope: str = ""
    levels: Levels = field(default_factory=dict)
    seeds: NDArray[np.float64] | None = None  # (values, 2): sum of squares, degrees of freedom

    def at(self, chosen: NDArray[np.bool_] | NDArray[np.intp]) -> Yardstick:
        """Only the values ``chosen`` (a mask or positions)."""
        levels = {key: level.at(chosen) for key, level in self.levels.items()}
        seeds = None if self.seeds is None else self.seeds[chosen]
        return Yardstick(self.jobs[chosen], self.values[chosen], self.scope, levels, seeds)

    def named(self) -> str:
        """'4 comparable jobs (optimizer=adamw): job1, job2, job4, job5'."""
        n = len(self.jobs)
        scope = f" ({self.scope})" if self.scope else ""
        head = f"{n} comparable job{'' if n == 1 else 's'}{scope}"
        if not n:
            return head
        shown = ", ".join(self.jobs[:NAMED_JOBS].tolist())
        more = f" and {n - NAMED_JOBS} more" if n > NAMED_JOBS else ""
        return f"{head}: {shown}{more}"

    def seed_spread(self) -> tuple[float, int] | None:
        """The seeds' variance pooled over the jobs (a job whose own is over
        ``SEED_OUTLIER`` times the median job's left out) and its degrees of freedom."""
        if self.seeds is None:
            return None
        ss, df = self.seeds[:, 0], self.seeds[:, 1]
        ss, df = ss[df > 0], df[df > 0]
        if not df.size:
            return None
        own = ss / df
        kept = own <= SEED_OUTLIER * float(np.median(own))
        total = int(df[kept].sum())
        return sum(ss[kept].tolist()) / total, total  # in job order, a float at a time


def robust_spread(values: NDArray[np.float64]) -> tuple[float, float]:
    """Median and scaled MAD (``MAD_SCALE * median |x - median|``) of ``values``."""
    median = float(np.median(values))
    return median, MAD_SCALE * float(np.median(np.abs(values - median)))


@dataclass(frozen=True)
class Judged:
    """A numeric check against its yardstick: ``rose`` beyond it (a regression), ``fell`` as
    far below (a change, never noise), and the rule that decided."""

    rose: bool
    fell: bool
    rule: str


@dataclass(frozen=True)
class Rise:
    """One check's values in the two compared jobs and what judges their change: the
    check's ``tolerance`` for one value (None: none), whether the second value ``failed``
    its own check, the variance of one job's value in seed variances (``seed_factor``;
    None: the check has no seeds), how many rows of the check the second job has for the
    variant (they share the level), and its metadata."""

    before: float
    after: float
    tolerance: float | None = None
    unit: str = ""
    failed: bool = False
    seed_factor: float | None = None
    rows: int = 1
    meta: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Noise:
    """What the comparable jobs show: their centre (the mean of those kept), the standard
    deviation of one job's value with its degrees of freedom, and where it comes from."""

    centre: float
    sd: float
    df: float
    kept: int
    set_aside: Sequence[str]
    source: str

    def bound(self, alpha: float) -> float:
        """Half-width of the one-sided ``1 - alpha`` prediction bound of one more job."""
        if self.sd == 0:
            return 0.0
        return t_quantile(1 - alpha, self.df) * self.sd * math.sqrt(1 + 1 / self.kept)


def signed(value: float) -> str:
    """A change with its sign, NaN as the README writes it (``+nan`` would read as a rise)."""
    return "NaN" if math.isnan(value) else f"{value:+.4g}"


def measure_noise(stick: Yardstick, seeds: tuple[float, float] | None) -> Noise:
    """The jobs' centre and noise (``seeds``: the sd of one job's value from its seeds and
    its degrees of freedom): the jobs farther than ``TRIM`` times the larger of it and the
    scaled MAD from the median set aside, the seed sd unless the kept jobs spread beyond it
    (chi-square test at ``HETEROGENEITY``), then their standard deviation."""
    median, mad = robust_spread(stick.values)
    reach = TRIM * max(seeds[0] if seeds else 0.0, mad)
    near = np.abs(stick.values - median) <= reach
    values, aside = stick.values[near], stick.jobs[~near].tolist()
    n = len(values)
    centre = math.fsum(values.tolist()) / n  # statistics.fmean
    between = exact_variance(values) if n > 1 else 0.0
    if seeds is not None and seeds[0] > 0:
        sd, df = seeds
        if n < 2 or (n - 1) * between / sd**2 <= chi2_quantile(1 - HETEROGENEITY, n - 1):
            return Noise(centre, sd, df, n, aside, "their seeds")
    return Noise(centre, math.sqrt(between), max(n - 1, 1), n, aside, "between them")


def _seed_noise(rise: Rise, stick: Yardstick) -> tuple[float, float] | None:
    pooled = stick.seed_spread() if rise.seed_factor is not None else None
    if pooled is None or rise.seed_factor is None:
        return None
    return math.sqrt(pooled[0] * rise.seed_factor), pooled[1]


def _between_two(
    rise: Rise, stick: Yardstick, seeds: tuple[float, float] | None, alpha: float, fewer: str
) -> Judged | None:
    """Too few comparable jobs to measure a spread between jobs: the rise beyond the
    tolerance where the second value fails its check, else beyond twice it (two values that
    each pass may differ by that), and beyond the one-sided bound of the seed noise of a
    difference of two jobs."""
    change = rise.after - rise.before
    limits = []
    if rise.tolerance is not None and rise.failed:
        limits.append((rise.tolerance, f"the tolerance {{:.4g}}{rise.unit} (a FAIL)"))
    elif rise.tolerance is not None:
        tol = f"{rise.tolerance:.4g}{rise.unit}"
        limits.append((2 * rise.tolerance, f"{{:.4g}}, twice the tolerance {tol} (a PASS)"))
    if seeds is not None:
        bound = t_quantile(1 - alpha, seeds[1]) * seeds[0] * math.sqrt(2)
        sd = f"sd {seeds[0]:.4g}, {seeds[1]:g} df"
        limits.append(
            (bound, f"{{:.4g}}, the one-sided {1 - alpha:.1%} bound of seed noise ({sd})")
        )
    if not limits:
        return None
    limit, how = max(limits)
    rule = f"rise {signed(change)}, limit {how.format(limit)} ({stick.named()}, {fewer})"
    return Judged(change > limit, -change > limit, rule)


def judge_rise(rise: Rise, stick: Yardstick, gate: GateExpectations) -> Judged | None:
    """The second value judged against the comparable jobs (``Rise``, docs/claims.md): with
    ``min_noise_jobs`` or more (of its group, where a key splits them), a regression beyond
    their one-sided ``1 - false_alarm`` prediction bound (the level shared by the check's
    rows), above the first value and, unless it fails its own check, more than the tolerance
    from their centre; with fewer, ``_between_two``. None when there is nothing to judge by
    (the status decides)."""
    before, after = rise.before, rise.after
    if not math.isfinite(after):
        shown = "NaN" if math.isnan(after) else after
        return Judged(math.isfinite(before), False, f"status: {shown} after {before}")
    stick = stick.at(np.isfinite(stick.values))
    split = find_split(stick.values, stick.levels, rise.meta)
    head = ""
    if split is not None:
        stick = stick.at(split.groups[split.own])
        head = f"{split.note()}; "
    alpha = gate.false_alarm / max(rise.rows, 1)
    seeds = _seed_noise(rise, stick)
    if len(stick.values) < gate.min_noise_jobs:
        fewer = f"fewer than {gate.min_noise_jobs} to measure a spread between jobs"
        judged = _between_two(rise, stick, seeds, alpha, fewer)
        return judged and Judged(judged.rose, judged.fell, head + judged.rule)
    noise = measure_noise(stick, seeds)
    bound = noise.bound(alpha)
    change, off = after - before, after - noise.centre
    beyond_floor = rise.failed or rise.tolerance is None or off > rise.tolerance
    aside = f" (set aside: {', '.join(noise.set_aside)})" if noise.set_aside else ""
    tol = "" if rise.tolerance is None else f", tolerance {rise.tolerance:.4g}{rise.unit}"
    rule = (
        f"{head}{stick.named()}{aside}; centre {noise.centre:.6g}, sd {noise.sd:.4g} "
        f"({noise.source}, {noise.df:g} df); {signed(off)} from the centre, bound "
        f"{bound:.4g} (one-sided {1 - alpha:.1%}){tol}; rise {signed(change)}"
    )
    return Judged(off > bound and change > 0 and beyond_floor, -off > bound and change < 0, rule)


def _upper_bound(values: Sequence[float], alpha: float) -> float:
    """One-sided (1 - alpha) upper prediction bound of one more draw like ``values``:
    mean + t_(1-alpha, n-1) * sd * sqrt(1 + 1/n)."""
    n = len(values)
    sd = statistics.stdev(values)
    return statistics.fmean(values) + t_quantile(1 - alpha, n - 1) * sd * math.sqrt(1 + 1 / n)


def judge_ema(
    after: float | None, expected: float | None, pool: Yardstick, exp: Expectations
) -> tuple[bool, str]:
    """Whether the EMA check's PASS -> FAIL is beyond the comparable jobs' seed noise (its
    seed-noise deltas), and the rule that decided."""
    gate = exp.gate
    if after is None or not math.isfinite(after):
        return True, "status: the EMA delta is not a number"
    pool = pool.at(np.isfinite(pool.values) & (pool.values > 0))
    factor = exp.training.noise_factor
    if len(pool.values) >= max(gate.min_noise_jobs, 2):
        # seed-noise deltas are positive and skewed: the bound is taken on their logs
        logs = [math.log(v) for v in pool.values.tolist()]
        bound = factor * math.exp(_upper_bound(logs, gate.alpha))
        return after > bound, (
            f"seed noise: {after:.5f} vs {bound:.5f}, the one-sided {1 - gate.alpha:.1%} "
            f"bound of {factor:g}x the seed noise of {pool.named()}"
        )
    mean = statistics.fmean(pool.values.tolist()) if pool.values.size else expected or 0.0
    limit = gate.ema_margin_factor * mean
    return after > limit, (
        f"margin: {after:.5f} vs {limit:.5f} = {gate.ema_margin_factor:g}x the mean seed "
        f"noise of {pool.named()} (fewer than {gate.min_noise_jobs} to test against)"
    )
