"""What would decide an INCONCLUSIVE stochastic claim: how many more runs (or jobs), of which
variant, and what they cost at the speed the jobs logged. The counts are read off the same
confidence sequences the claims are judged by (tracker.analysis.sequential), assuming the
new runs look like the ones there: the same difference and spread, or the same share."""

from __future__ import annotations

import math
from dataclasses import astuple

import numpy as np

from tracker.analysis.sequential import bernoulli_cs, boundary_factor, small_sample_factor
from tracker.analysis.stats import _scipy_special, clopper_pearson

LIMIT = 10_000  # beyond this many more runs or jobs the count says "more than"


def runs_to_decide(
    gap: float, sd: float, level: float, n: float, planned: float, *, fixed: bool = False
) -> int | None:
    """Further runs per arm after which the interval of a difference ``gap`` from the margin
    with per-run ``sd`` (both arms alike), now ``n`` runs per arm, would lie on one side of
    the margin: the CS tuned for ``planned`` runs, or with ``fixed`` the Welch interval at
    ``level``; None when it never would (on the margin, no spread) or only beyond LIMIT."""
    if gap == 0 or not math.isfinite(sd) or sd <= 0:
        return None
    more = np.arange(1, LIMIT + 1, dtype=np.float64)
    t = n + more
    alpha = 1 - level
    if fixed:
        half = sd * np.sqrt(2 / t) * _scipy_special().stdtrit(2 * t - 2, 1 - alpha / 2)
    else:
        half = sd * np.sqrt(2 / t) * boundary_factor(t, alpha, planned)
        half = half * small_sample_factor(2 * t - 2, alpha)
    found = np.flatnonzero(half < gap)
    return int(more[found[0]]) if found.size else None


def jobs_to_decide(
    k: int, n: int, share: float, level: float, *, fixed: bool = False
) -> tuple[int, bool] | None:
    """Further jobs, all like the share seen so far leans (within if k/n >= share, else
    outside), after which the share's CS (with ``fixed``, its Clopper-Pearson interval)
    excludes ``share``; with whether they are jobs within. None beyond LIMIT."""
    within = k / n >= share
    for more in range(1, LIMIT + 1):
        hits = k + more if within else k
        low, high = (
            clopper_pearson(hits, n + more, level)
            if fixed
            else astuple(bernoulli_cs(hits, n + more, level))
        )
        if (within and low >= share) or (not within and high < share):
            return more, within
    return None


def hours(values: list[float]) -> str:
    """' (about 2.1 hours each at the logged wall time)', '' when no run logged one."""
    if not values:
        return ""
    mean = sum(values) / len(values)
    shown = f"{mean:.2g}" if mean < 10 else f"{mean:.0f}"
    return f" (about {shown} hours each at the logged wall time)"
