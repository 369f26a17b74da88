"""The comparing claims' rule with jobs as strata: the difference within jobs at every look
(after each job, in job order), the running intersection of its confidence sequence, the
planned design's one test, and the jobs whose own difference is off (docs/claims.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from tracker.analysis.claims.specs import MIN_RUNS, Compared, NoninferiorityClaim
from tracker.analysis.stats import _scipy_special, mann_whitney_u
from tracker.analysis.strata import (
    WITHIN,
    Stratified,
    Totals,
    cumulative,
    half_width,
    job_totals,
    rounding_floor,
    stratified,
)

VALUE = "value"  # the compared metric's column in the runs judged here
REPRODUCES, CONTRADICTS = 1, -1  # a look's decision; 0: none
# degrees of freedom of the spread below which a look decides nothing: with the spread
# measured between 3 jobs (2 df) a candidate on the margin was called REPRODUCED at some
# look in 5.3% of sequences, from 4 jobs on 4.2% (bench/bench_claims_strata.py)
MIN_DF = 3


@dataclass(frozen=True)
class Strata:
    """The runs of one comparison per job, in job order (the signed values: higher is
    worse), and the per-run variance floor of their rounding."""

    jobs: list[str]
    nx: np.ndarray
    mx: np.ndarray
    qx: np.ndarray
    ny: np.ndarray
    my: np.ndarray
    qy: np.ndarray
    floor: float

    def per_job(self) -> Totals:
        return job_totals(self.nx, self.mx, self.qx, self.ny, self.my, self.qy)

    def looks(self) -> Totals:
        return cumulative(self.per_job())


def strata(cand: pl.DataFrame, base: pl.DataFrame, sign: float) -> Strata:
    """Per job (in the order of the runs), each variant's runs, mean and sum of squares."""
    jobs = pl.concat([cand["job"], base["job"]]).unique(maintain_order=True).to_list()
    columns: list[np.ndarray] = []
    for frame in (cand, base):
        grouped = frame.group_by("job").agg(
            n=pl.len(),
            mean=(sign * pl.col(VALUE)).mean(),
            q=((sign * pl.col(VALUE)) - (sign * pl.col(VALUE)).mean()).pow(2).sum(),
        )
        found = {job: (n, m, q) for job, n, m, q in grouped.iter_rows()}
        rows = np.array([found.get(job, (0, 0.0, 0.0)) for job in jobs], dtype=np.float64)
        columns += [rows[:, 0], rows[:, 1], rows[:, 2]] if len(jobs) else [np.zeros(0)] * 3
    values = pl.concat([cand[VALUE], base[VALUE]]).to_numpy()
    nx, mx, qx, ny, my, qy = columns
    return Strata(jobs, nx, mx, qx, ny, my, qy, rounding_floor(values))


def decisions(low: np.ndarray, high: np.ndarray, spec: Compared) -> np.ndarray:
    """REPRODUCES, CONTRADICTS or 0 for intervals of how much worse the candidate is."""
    m = spec.margin
    if isinstance(spec, NoninferiorityClaim):
        there, back = high < m, low > m
    else:
        there, back = (low > -m) & (high < m), (low > m) | (high < -m)
    return np.where(there, REPRODUCES, np.where(back, CONTRADICTS, 0))


@dataclass(frozen=True)
class Judged:
    """What the looks say: the last look's stratified difference (scalars), its own
    interval, the interval judged (the running intersection, or the planned test's), the
    decision (0: none) and the job since which it holds (None: no decision)."""

    last: Stratified
    own: tuple[float, float]
    judged: tuple[float, float]
    decision: int
    since: str | None
    enough: bool  # MIN_RUNS runs per variant in jobs with both
    empty_since: str | None  # the running intersection is empty from this job on


def _scalar(s: Stratified, at: int) -> Stratified:
    return Stratified(*(np.asarray(getattr(s, name))[at] for name in s.__dataclass_fields__))


@dataclass(frozen=True)
class Looks:
    """Every look's stratified difference and interval (arrays over looks on the last axis),
    whether it may decide (MIN_RUNS runs per variant in jobs with both), the running
    intersection of the usable looks' intervals and each look's decision from it."""

    s: Stratified
    low: np.ndarray
    high: np.ndarray
    usable: np.ndarray
    kept_low: np.ndarray
    kept_high: np.ndarray
    codes: np.ndarray  # decision of the running intersection (0 once it is empty)


def decidable(totals: Totals, s: Stratified, *, anytime: bool) -> np.ndarray:
    """The looks that may decide: MIN_RUNS runs per variant in jobs with both, and for the
    anytime rule a spread of MIN_DF degrees of freedom (the fixed t test is exact at any)."""
    with np.errstate(invalid="ignore"):
        enough = (totals.nx >= MIN_RUNS) & (totals.ny >= MIN_RUNS)
        return enough & (s.df >= (MIN_DF if anytime else 1))


def looks(totals: Totals, floor: float, spec: Compared, *, anytime: bool) -> Looks:
    """The looks of ``totals`` (cumulative over jobs, on the last axis)."""
    s = stratified(totals, floor)
    half = half_width(s, spec.level, spec.tuned_runs, anytime=anytime)
    low, high = s.estimate - half, s.estimate + half
    usable = decidable(totals, s, anytime=anytime) & np.isfinite(half)
    kept_low = np.maximum.accumulate(np.where(usable, low, -np.inf), axis=-1)
    kept_high = np.minimum.accumulate(np.where(usable, high, np.inf), axis=-1)
    nonempty = kept_low <= kept_high
    codes = np.where(usable.cumsum(axis=-1) > 0, decisions(kept_low, kept_high, spec), 0)
    codes = np.where(np.logical_and.accumulate(nonempty, axis=-1), codes, 0)
    return Looks(s, low, high, usable, kept_low, kept_high, codes)


def judge_looks(data: Strata, spec: Compared, *, anytime: bool) -> Judged:
    """``anytime``: the decision read off the running intersection from the first look with
    MIN_RUNS runs per variant on, kept once reached; else the one fixed-sample t interval at
    the last look."""
    seen = looks(data.looks(), data.floor, spec, anytime=anytime)
    last = _scalar(seen.s, -1)
    own = (float(seen.low[-1]), float(seen.high[-1]))
    enough = bool(seen.usable[-1])
    if not anytime:
        decision = int(decisions(seen.low[-1:], seen.high[-1:], spec)[0]) if enough else 0
        return Judged(last, own, own, decision, data.jobs[-1] if decision else None, enough, None)
    decided = np.flatnonzero(seen.codes)
    at = int(decided[0]) if decided.size else None
    empty = np.flatnonzero(seen.kept_low > seen.kept_high)
    judged = (float(seen.kept_low[-1]), float(seen.kept_high[-1]))
    return Judged(
        last,
        own,
        judged if seen.usable.any() and not empty.size else own,
        int(seen.codes[at]) if at is not None else 0,
        data.jobs[at] if at is not None else None,
        enough,
        data.jobs[int(empty[0])] if empty.size else None,
    )


def off_jobs(data: Strata, last: Stratified, spec: Compared) -> list[tuple[str, float]]:
    """The jobs whose own difference's t interval at the claim's level lies beyond the
    margin (a job's difference with the spread of all), with their differences."""
    both = (data.nx > 0) & (data.ny > 0)
    if not np.isfinite(last.df) or not both.any():
        return []
    d = data.mx - data.my
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(last.vx / data.nx + last.vy / data.ny)
    half = se * float(_scipy_special().stdtrit(last.df, 1 - (1 - spec.level) / 2))
    codes = decisions(d - half, d + half, spec)
    return [
        (job, float(d[i])) for i, job in enumerate(data.jobs) if both[i] and codes[i] == CONTRADICTS
    ]


def spread_words(data: Strata, last: Stratified, names: tuple[str, str]) -> str:
    """How the standard error was found, in words."""
    jobs = int(((data.nx > 0) & (data.ny > 0)).sum())
    if last.mode == WITHIN:
        return (
            f"spread within jobs: sd {names[0]} {np.sqrt(last.vx):.2g}, {names[1]} "
            f"{np.sqrt(last.vy):.2g}, {last.df:.1f} df"
        )
    return (
        f"spread between the {jobs} jobs' differences (too few repeated runs within jobs): "
        f"{last.df:.0f} df"
    )


def planned_subset(frame: pl.DataFrame, planned: int) -> pl.DataFrame:
    """The first ``planned`` runs of each variant, in the order of the runs (ingest order)."""
    return frame.filter(pl.int_range(pl.len()).over("variant") < planned)


# pairs of groups up to this many value pairs are counted at once, with others of their sizes
COUNTED_AT_ONCE = 64


def improvement_within_jobs(
    cand: dict[str, np.ndarray], base: dict[str, np.ndarray]
) -> float | None:
    """P(a candidate run ends below a baseline run of the same job): the jobs' U statistics
    of the baseline over their pairs (lower is better)."""
    shared = [(base[j], cand[j]) for j in cand if j in base]
    pairs = sum(len(b) * len(c) for b, c in shared)
    if not pairs:
        return None
    return summed_mann_whitney_u(shared) / pairs


def summed_mann_whitney_u(groups: Sequence[tuple[np.ndarray, np.ndarray]]) -> float:
    """The sum of ``mann_whitney_u(a, b)`` over ``groups``, the same number: groups of one pair
    of sizes counted by comparing every pair at once (thousands of jobs' few seeds each cost a
    binary search a job otherwise), a group with a NaN or a large one by ``mann_whitney_u``."""
    total = 0.0
    alike: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]] = {}
    for a, b in groups:
        if len(a) * len(b) > COUNTED_AT_ONCE:
            total += mann_whitney_u(a, b)
        else:
            alike.setdefault((len(a), len(b)), []).append((a, b))
    for same in alike.values():
        a, b = (np.stack([pair[i] for pair in same]) for i in (0, 1))  # (groups, size)
        finite = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
        x, y = a[finite][:, :, None], b[finite][:, None, :]
        # twice U: its halves counted as ones, an integer (a sum of U's, exact in floats)
        total += float(2 * np.count_nonzero(x > y) + np.count_nonzero(x == y)) / 2
        total += sum(mann_whitney_u(same[i][0], same[i][1]) for i in np.flatnonzero(~finite))
    return total
