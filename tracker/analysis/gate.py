"""The regression gate's yardstick: what the comparable jobs show for one check and subject,
and whether a change goes beyond it (docs/claims.md, "The regression gate").

Pure: the caller (``tracker.queries.compare``) picks the comparable jobs and passes their
values. The spread is the median and the MAD, so that one faulty job among them (a planted
regression, a broken run) moves neither; the floor under it is the check's own tolerance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tracker.analysis.stats import t_quantile

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations, GateExpectations

# MAD times this estimates the standard deviation of normal data.
MAD_SCALE = 1.4826
# A rule names at most this many of the jobs that made its yardstick.
NAMED_JOBS = 12


@dataclass(frozen=True)
class Yardstick:
    """The comparable jobs' values of one check and subject, with their names, and how the
    jobs were chosen (``optimizer=adamw``; empty when no key restricts them)."""

    jobs: Sequence[str] = ()
    values: Sequence[float] = ()
    scope: str = ""

    def keep(self, test: Callable[[float], bool]) -> Yardstick:
        """Only the jobs whose value passes ``test``."""
        kept = [(j, v) for j, v in zip(self.jobs, self.values, strict=True) if test(v)]
        return Yardstick([j for j, _ in kept], [v for _, v in kept], self.scope)

    def named(self) -> str:
        """'4 comparable jobs (optimizer=adamw): job1, job2, job4, job5'."""
        n = len(self.jobs)
        scope = f" ({self.scope})" if self.scope else ""
        head = f"{n} comparable job{'' if n == 1 else 's'}{scope}"
        if not n:
            return head
        shown = ", ".join(self.jobs[:NAMED_JOBS])
        more = f" and {n - NAMED_JOBS} more" if n > NAMED_JOBS else ""
        return f"{head}: {shown}{more}"


def robust_spread(values: Sequence[float]) -> tuple[float, float]:
    """Median and scaled MAD (``MAD_SCALE * median |x - median|``) of ``values``."""
    median = statistics.median(values)
    return median, MAD_SCALE * statistics.median(abs(v - median) for v in values)


@dataclass(frozen=True)
class Judged:
    """A numeric check against its yardstick: ``rose`` beyond it (a regression), ``fell`` as
    far below (a change, never noise), and the rule that decided."""

    rose: bool
    fell: bool
    rule: str


def signed(value: float) -> str:
    """A change with its sign, NaN as the README writes it (``+nan`` would read as a rise)."""
    return "NaN" if math.isnan(value) else f"{value:+.4g}"


def judge_rise(
    before: float,
    after: float,
    tolerance: float | None,
    unit: str,
    stick: Yardstick,
    gate: GateExpectations,
) -> Judged | None:
    """A rise ``after - before`` judged against the larger of ``tolerance`` and
    ``spread_factor`` MADs of the comparable jobs, and the new value against their median
    by as much (an outlier first job cannot make a typical second one look bad); None when
    there is neither a tolerance nor a measured spread (the status decides)."""
    if not math.isfinite(after):
        shown = "NaN" if math.isnan(after) else after
        return Judged(math.isfinite(before), False, f"status: {shown} after {before}")
    rise = after - before
    stick = stick.keep(math.isfinite)
    tol = f"tolerance {tolerance:.4g}{unit}" if tolerance is not None else "no tolerance"
    if len(stick.values) < gate.min_noise_jobs:
        if tolerance is None:
            return None
        rule = (
            f"{tol} ({stick.named()}, fewer than {gate.min_noise_jobs} to measure a spread): "
            f"rise {signed(rise)}"
        )
        return Judged(rise > tolerance, -rise > tolerance, rule)
    median, mad = robust_spread(stick.values)
    spread = gate.spread_factor * mad
    if tolerance is None and spread == 0:
        return None
    limit = max(tolerance or 0.0, spread)
    mads = f"{gate.spread_factor:g} MAD = {spread:.4g}"
    which = f"{mads} ({tol})" if limit == spread else f"the {tol} ({mads})"
    rule = (
        f"median/MAD of {stick.named()}; rise {signed(rise)}, {signed(after - median)} "
        f"from their median {median:.6g}; limit: {which}"
    )
    rose = rise > limit and after - median > limit
    fell = -rise > limit and median - after > limit
    return Judged(rose, fell, rule)


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
    pool = pool.keep(lambda v: v > 0 and math.isfinite(v))
    factor = exp.training.noise_factor
    if len(pool.values) >= max(gate.min_noise_jobs, 2):
        # seed-noise deltas are positive and skewed: the bound is taken on their logs
        bound = factor * math.exp(_upper_bound([math.log(v) for v in pool.values], gate.alpha))
        return after > bound, (
            f"seed noise: {after:.5f} vs {bound:.5f}, the one-sided {1 - gate.alpha:.1%} "
            f"bound of {factor:g}x the seed noise of {pool.named()}"
        )
    mean = statistics.fmean(pool.values) if pool.values else expected or 0.0
    limit = gate.ema_margin_factor * mean
    return after > limit, (
        f"margin: {after:.5f} vs {limit:.5f} = {gate.ema_margin_factor:g}x the mean seed "
        f"noise of {pool.named()} (fewer than {gate.min_noise_jobs} to test against)"
    )
