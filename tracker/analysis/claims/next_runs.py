"""What would decide an INCONCLUSIVE stochastic claim: how many more runs (or jobs), of which
variant, and what they cost at the speed each variant's runs logged.

For the comparing claims the count is planned by simulating the claim's own rule forward
(tracker.analysis.strata): ``DRAWS`` futures of ``m`` more runs per variant, drawn with the
observed difference within jobs (the planning difference) and each variant's observed
spread, added to the runs there are (as one new job of ``m`` runs per variant, or, where the
spread is measured between jobs, as ``m`` new jobs of one run each), judged as the claim is
judged (for the anytime rule, intersected with the sequence so far); the count is the
fewest ``m`` settling the claim in at least ``SETTLE`` of them, up to ``MOST_RUNS``."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np

from tracker.analysis.claims.specs import Compared
from tracker.analysis.claims.within_jobs import Judged, Strata, decidable, decisions
from tracker.analysis.sequential import bernoulli_cs
from tracker.analysis.stats import clopper_pearson
from tracker.analysis.strata import (
    WITHIN,
    cumulative,
    half_width,
    job_totals,
    stratified,
)

LIMIT = 10_000  # beyond this many more runs or jobs the count says "more than"
SETTLE = 0.80  # the probability the advised runs settle the claim with
MOST_RUNS = 50  # per variant: more is beyond what a group would run for one claim
DRAWS = 400  # simulated futures per count
PLAN_SEED = 20261203  # fixed: the same evidence gives the same advice


def settle_probability(
    data: Strata, judged: Judged, spec: Compared, *, anytime: bool
) -> np.ndarray:
    """For ``m`` = 1..MOST_RUNS more runs per variant, the share of simulated futures in
    which the claim's rule decides (either way)."""
    last = judged.last
    rng = np.random.default_rng(PLAN_SEED)
    shape = (DRAWS, MOST_RUNS)
    x = float(last.estimate) + np.sqrt(float(last.vx)) * rng.standard_normal(shape)
    y = np.sqrt(float(last.vy)) * rng.standard_normal(shape)
    now = data.looks().last()
    if last.mode == WITHIN:
        m = np.arange(1, MOST_RUNS + 1, dtype=np.float64)
        mx, my = x.cumsum(axis=1) / m, y.cumsum(axis=1) / m
        qx = (x**2).cumsum(axis=1) - m * mx**2
        qy = (y**2).cumsum(axis=1) - m * my**2
        count = np.broadcast_to(m, shape)
        new = job_totals(count, mx, qx, count, my, qy)
    else:
        ones, zeros = np.ones(shape), np.zeros(shape)
        new = cumulative(job_totals(ones, x, zeros, ones, y, zeros), axis=1)
    total = new + now
    s = stratified(total, data.floor)
    half = half_width(s, spec.level, spec.tuned_runs, anytime=anytime)
    low, high = s.estimate - half, s.estimate + half
    if anytime and judged.enough:
        low, high = np.maximum(low, judged.judged[0]), np.minimum(high, judged.judged[1])
    settled = (decisions(low, high, spec) != 0) & decidable(total, s, anytime=anytime)
    return np.asarray(settled.mean(axis=0))


def runs_to_settle(data: Strata, judged: Judged, spec: Compared, *, anytime: bool) -> int | None:
    """The fewest further runs per variant that settle the claim with probability SETTLE
    (settle_probability); None beyond MOST_RUNS or without a spread to plan with."""
    last = judged.last
    if not (np.isfinite(last.vx) and np.isfinite(last.vy) and np.isfinite(last.estimate)):
        return None
    found = np.flatnonzero(settle_probability(data, judged, spec, anytime=anytime) >= SETTLE)
    return int(found[0]) + 1 if found.size else None


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


def _hours_text(mean: float) -> str:
    return f"{mean:.2g}" if mean < 10 else f"{mean:.0f}"


def hours(values: list[float]) -> str:
    """' (about 2.1 hours each at the logged wall time)', '' when no run logged one."""
    if not values:
        return ""
    return f" (about {_hours_text(sum(values) / len(values))} hours each at the logged wall time)"


def variant_hours(counts: dict[str, int], logged: dict[str, list[float]]) -> str:
    """' (flash about 0.13 hours a run, ref 0.31: about 2.6 hours in all)' for ``counts``
    more runs of each variant, each at its own runs' mean logged time; '' when none logged
    one, and a variant without a logged time is said to have none."""
    known = {v: sum(t) / len(t) for v, t in logged.items() if t}
    if not known:
        return ""
    parts, total = [], 0.0
    for variant, count in counts.items():
        if variant in known:
            parts.append(f"{variant} about {_hours_text(known[variant])} hours a run")
            total += count * known[variant]
        else:
            parts.append(f"{variant} no logged time")
    every = len(known) == len(counts)
    return f" ({', '.join(parts)}: {'' if every else 'at least '}{_hours_text(total)} hours in all)"
