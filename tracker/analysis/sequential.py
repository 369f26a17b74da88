"""Confidence sequences: intervals that hold at every look at once, however often one looks.

A fixed-sample interval at level 1 - alpha covers the truth with that chance at ONE planned
look; looked at after every job, some look misses far more often (the claims' simulation,
bench/bench_claims_sequential.py). A confidence sequence (CS) covers the truth at all looks
simultaneously with chance at least 1 - alpha, so a verdict read off it may be read at any
time and in any order the jobs arrive.

* ``mean_difference_cs``: the asymptotic CS of Waudby-Smith, Arnold, Wu and Ramdas (2024),
  "Time-uniform central limit theory and asymptotic confidence sequences", Ann. Statist.,
  Theorem 2.2: the two-sided normal-mixture (Robbins) boundary of Howard, Ramdas, McAuliffe
  and Sekhon (2021), "Time-uniform, nonparametric, nonasymptotic confidence sequences",
  Ann. Statist. 49(2), eq. (14), applied to the estimate with its variance estimated. For a
  statistic with standard error ``se`` it is ``estimate ± se sqrt((1 + a) log((1 + a) /
  (a alpha²)))`` with ``a = 1 / (t rho²)``; ``rho`` is chosen (their eq. (2.5)) so that the
  boundary is tightest at ``planned`` runs per arm, ``t`` the harmonic mean of the two arms'
  runs (the sample size whose variance ``se²`` is).
* ``bernoulli_cs``: Robbins' (1970) beta-binomial mixture, exact and nonasymptotic
  (Howard et al. 2021, section 3.2's conjugate mixture for sub-Bernoulli observations): the
  shares ``p`` where the uniform-prior mixture likelihood ratio stays below ``1 / alpha``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracker.analysis.stats import _scipy_special, normal_quantile

__all__ = [
    "Interval",
    "bernoulli_cs",
    "boundary_factor",
    "mean_cs",
    "mean_difference_cs",
    "small_sample_factor",
]


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def inside(self, margin: float) -> bool:
        return -margin < self.low and self.high < margin

    def outside(self, margin: float) -> bool:
        return self.low > margin or self.high < -margin


def boundary_factor(t: np.ndarray | float, alpha: float, planned: float) -> np.ndarray | float:
    """The CS half-width in standard errors at effective sample size ``t`` (numpy-friendly):
    ``sqrt((1 + a) log((1 + a) / (a alpha²)))`` with ``a = planned / (t k)``, ``k = -2 log
    alpha + log(1 - 2 log alpha)`` (Waudby-Smith et al. 2024, eq. (2.5): rho² = k / planned)."""
    k = -2 * math.log(alpha) + math.log(1 - 2 * math.log(alpha))
    a = planned / (np.asarray(t, dtype=np.float64) * k)
    return np.sqrt((1 + a) * np.log((1 + a) / (a * alpha**2)))


def small_sample_factor(df: np.ndarray | float, alpha: float) -> np.ndarray | float:
    """Student's t over the normal quantile at ``df`` degrees of freedom: the CS is an
    asymptotic one, and with a handful of runs the estimated variance is itself noisy; the
    same widening a t interval makes over a z interval keeps the small looks honest (the
    simulation's first looks, where the variance comes from two or three runs)."""
    z = normal_quantile(1 - alpha / 2)
    df = np.asarray(df, dtype=np.float64)
    return np.asarray(_scipy_special().stdtrit(df, 1 - alpha / 2)) / z


def mean_difference_cs(x: np.ndarray, y: np.ndarray, level: float, planned: float) -> Interval:
    """The CS at ``level`` of ``mean(x) - mean(y)``, two or more values on each side: the
    Welch standard error and degrees of freedom, the normal-mixture boundary, widened by
    ``small_sample_factor`` at the Welch degrees of freedom."""
    alpha = 1 - level
    nx, ny = len(x), len(y)
    vx, vy = x.var(ddof=1) / nx, y.var(ddof=1) / ny
    se = math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx**2 / (nx - 1) + vy**2 / (ny - 1)) if se > 0 else nx + ny - 2
    t = 2 / (1 / nx + 1 / ny)
    half = se * float(boundary_factor(t, alpha, planned)) * float(small_sample_factor(df, alpha))
    diff = float(x.mean() - y.mean())
    return Interval(diff - half, diff + half)


def mean_cs(x: np.ndarray, level: float, planned: float) -> Interval:
    """The CS at ``level`` of ``mean(x)``, two or more values: ``mean_difference_cs``'s
    boundary with one sample's standard error, widened at its ``n - 1`` degrees of freedom."""
    alpha, n = 1 - level, len(x)
    se = math.sqrt(x.var(ddof=1) / n)
    half = se * float(boundary_factor(n, alpha, planned)) * float(small_sample_factor(n - 1, alpha))
    mean = float(x.mean())
    return Interval(mean - half, mean + half)


def _log_ratio(k: int, n: int, p: np.ndarray) -> np.ndarray:
    """log of the uniform-prior mixture likelihood ratio against share ``p``: B(k+1, n-k+1)
    / (p^k (1-p)^(n-k))."""
    special = _scipy_special()
    # xlogy: 0 log 0 = 0, the likelihood of no successes at p = 0 is 1
    with np.errstate(divide="ignore"):
        return special.betaln(k + 1, n - k + 1) - special.xlogy(k, p) - special.xlog1py(n - k, -p)


def bernoulli_cs(k: int, n: int, level: float) -> Interval:
    """The CS at ``level`` of a success probability, ``k`` successes in ``n >= 1`` trials:
    the ``p`` with mixture ratio below ``1 / (1 - level)`` (an interval: the log ratio is
    convex in p), its ends found by bisection to 1e-12."""
    limit = math.log(1 / (1 - level))
    centre = k / n
    if k in (0, n):
        # B(n + 1, 1) = 1 / (n + 1): the ratio is 1 / ((n + 1) p^n) (or (1 - p)^n), so the
        # open end is (alpha / (n + 1))^(1/n), with no scipy (a one-job report needs none)
        root = math.exp(math.log((1 - level) / (n + 1)) / n)
        return Interval(root, 1.0) if k == n else Interval(0.0, 1 - root)

    def end(lo: float, hi: float, inner_is_lo: bool) -> float:
        # bisection between a p inside the set (ratio < limit) and one outside
        inner, outer = (lo, hi) if inner_is_lo else (hi, lo)
        if _log_ratio(k, n, np.array([outer]))[0] < limit:
            return outer
        for _ in range(60):
            mid = (inner + outer) / 2
            if _log_ratio(k, n, np.array([mid]))[0] < limit:
                inner = mid
            else:
                outer = mid
        return inner

    return Interval(end(0.0, centre, False), end(centre, 1.0, True))
