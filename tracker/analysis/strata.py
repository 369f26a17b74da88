"""The difference of two variants' means with jobs as strata (blocks), at every look at once.

A job's level (its GPU, data order) moves both variants of the job together; the claims
compare the variants within each job and combine the jobs' differences, so that a level
shared by both variants never widens the interval (docs/claims.md, "Jobs as strata").

Per job ``j`` with ``nx_j`` candidate and ``ny_j`` baseline runs, ``d_j = mean(x_j) -
mean(y_j)`` and the weight ``w_j = nx_j ny_j / (nx_j + ny_j)`` (the Cochran-Mantel-Haenszel
weight of a difference of means, zero for a job without one of the variants). The estimate is
``D = sum(w d) / sum(w)``, the intrablock (job fixed effects) least-squares estimate of the
variant's effect. Its standard error, by the design (never by the data):

* ``within``: each variant's per-run variance pooled within jobs (a job's sum of squares
  about its own mean, over ``sum(n_j - 1)`` degrees of freedom, jobs with one variant only
  included), ``se² = (s_x² sum(w²/nx) + s_y² sum(w²/ny)) / sum(w)²`` on Satterthwaite's
  degrees of freedom: the stratified Welch interval; used when each variant has at least 2
  degrees of freedom within jobs (or as many as the jobs less one).
* ``between``: the jobs as clusters (the paired design when each job has one run per arm),
  ``se² = J/(J-1) sum(w² (d - D)²) / sum(w)²`` on ``J - 1`` degrees of freedom: robust to
  unequal spreads and to jobs whose own difference varies, and needing no replicate run.

Both variances are floored at the data's rounding: a per-run variance of at least ``r²/12``
(the variance of rounding to a step ``r``, Sheppard), ``r`` the smallest step between the
stored values. Every statistic is a sum over jobs, so ``Totals`` holds them cumulatively and
every function here works elementwise on arrays: the looks after each job (a cumulative sum
over jobs), simulated futures (next_runs) and simulated sequences (bench/).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from tracker.analysis.sequential import boundary_factor, small_sample_factor
from tracker.analysis.stats import _scipy_special

WITHIN, BETWEEN = 1, 2  # how the standard error was found (``Stratified.mode``)
MIN_WITHIN_DF = 2  # within-job degrees of freedom per variant that make `within` usable


@dataclass(frozen=True)
class Totals:
    """Sums over jobs (each field an array, one element per look or per simulated case)."""

    jobs: np.ndarray  # jobs with both variants
    nx: np.ndarray  # runs of each variant in those jobs
    ny: np.ndarray
    w: np.ndarray  # sum of w_j
    wd: np.ndarray  # sum of w_j d_j
    wdd: np.ndarray  # sum of w_j d_j²
    w2: np.ndarray  # sum of w_j²
    w2d: np.ndarray  # sum of w_j² d_j
    w2dd: np.ndarray  # sum of w_j² d_j²
    ax: np.ndarray  # sum of w_j² / nx_j
    ay: np.ndarray  # sum of w_j² / ny_j
    dfx: np.ndarray  # within-job degrees of freedom of each variant, every job
    dfy: np.ndarray
    qx: np.ndarray  # within-job sums of squares of each variant, every job
    qy: np.ndarray

    def __add__(self, other: Totals) -> Totals:
        return Totals(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def last(self) -> Totals:
        """The totals at the last look."""
        return Totals(*(getattr(self, f.name)[..., -1] for f in fields(self)))


def job_totals(
    nx: np.ndarray, mx: np.ndarray, qx: np.ndarray, ny: np.ndarray, my: np.ndarray, qy: np.ndarray
) -> Totals:
    """Each job's own terms (not yet summed): its runs ``n``, mean ``m`` and within-job sum
    of squares ``q`` of each variant (``m`` anything where ``n`` is 0)."""
    both = (nx > 0) & (ny > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(both, nx * ny / np.where(both, nx + ny, 1), 0.0)
        d = np.where(both, mx - my, 0.0)
        ax = np.where(both, w**2 / np.where(both, nx, 1), 0.0)
        ay = np.where(both, w**2 / np.where(both, ny, 1), 0.0)
    return Totals(
        both.astype(np.float64),
        np.where(both, nx, 0.0),
        np.where(both, ny, 0.0),
        w,
        w * d,
        w * d**2,
        w**2,
        w**2 * d,
        w**2 * d**2,
        ax,
        ay,
        np.maximum(nx - 1, 0.0),
        np.maximum(ny - 1, 0.0),
        np.where(nx > 1, qx, 0.0),
        np.where(ny > 1, qy, 0.0),
    )


def cumulative(per_job: Totals, axis: int = -1) -> Totals:
    """The totals after each job: cumulative sums of ``per_job`` along ``axis``."""
    return Totals(*(np.cumsum(getattr(per_job, f.name), axis=axis) for f in fields(per_job)))


@dataclass(frozen=True)
class Stratified:
    """The estimate, its standard error and degrees of freedom (NaN where there is none),
    the effective runs per arm (the sum of the jobs' harmonic means) and the ``mode``."""

    estimate: np.ndarray
    se: np.ndarray
    df: np.ndarray
    size: np.ndarray
    mode: np.ndarray  # WITHIN, BETWEEN, 0: no spread to judge by
    vx: np.ndarray  # the per-run variances used (between: one for both variants)
    vy: np.ndarray


def stratified(tot: Totals, floor: float) -> Stratified:
    """The stratified difference of ``tot`` (elementwise), per-run variances floored at
    ``floor``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = np.where(tot.w > 0, tot.wd / tot.w, np.nan)
        low_df = np.minimum(tot.dfx, tot.dfy)
        within_ok = (low_df >= MIN_WITHIN_DF) | ((low_df >= 1) & (low_df >= tot.jobs - 1))
        between_ok = ~within_ok & (tot.jobs >= 2)
        vx = np.maximum(tot.qx / tot.dfx, floor)
        vy = np.maximum(tot.qy / tot.dfy, floor)
        a, b = vx * tot.ax / tot.w**2, vy * tot.ay / tot.w**2
        df_within = (a + b) ** 2 / (a**2 / tot.dfx + b**2 / tot.dfy)
        scatter = np.maximum(tot.w2dd - 2 * estimate * tot.w2d + estimate**2 * tot.w2, 0.0)
        between = tot.jobs / (tot.jobs - 1) * scatter / tot.w**2
        floored = floor * (tot.ax + tot.ay) / tot.w**2
        var = np.where(within_ok, a + b, np.where(between_ok, np.maximum(between, floored), np.nan))
        df = np.where(within_ok, df_within, np.where(between_ok, tot.jobs - 1, np.nan))
        # between: one per-run variance for both variants, Var(d_j) = v / w_j
        v_between = np.maximum((tot.wdd - estimate * tot.wd) / (tot.jobs - 1), floor)
    mode = np.where(within_ok, WITHIN, np.where(between_ok, BETWEEN, 0))
    return Stratified(
        estimate,
        np.sqrt(var),
        df,
        2 * tot.w,
        mode,
        np.where(within_ok, vx, v_between),
        np.where(within_ok, vy, v_between),
    )


def half_width(s: Stratified, level: float, tuned: float, *, anytime: bool) -> np.ndarray:
    """The half-width of the confidence sequence at ``level`` tightest at ``tuned`` runs per
    arm (``anytime``), else of the fixed-sample t interval."""
    alpha = 1 - level
    with np.errstate(divide="ignore", invalid="ignore"):
        if anytime:
            factor = boundary_factor(s.size, alpha, tuned) * small_sample_factor(s.df, alpha)
        else:
            factor = _scipy_special().stdtrit(s.df, 1 - alpha / 2)
    return np.asarray(s.se * factor)


def resolution(values: np.ndarray) -> float:
    """The rounding step of stored values: the smallest step between distinct ones, else
    (all equal) the last decimal their shortest text shows; 0 for none."""
    distinct = np.unique(values[np.isfinite(values)])
    if distinct.size >= 2:
        return float(np.diff(distinct).min())
    if distinct.size == 0:
        return 0.0
    text = repr(float(distinct[0]))
    if "e" in text or "." not in text:
        return 0.0
    return 10.0 ** -len(text.split(".")[1])


def rounding_floor(values: np.ndarray) -> float:
    """The per-run variance floor: the variance of rounding to the data's step, r²/12."""
    return resolution(values) ** 2 / 12
