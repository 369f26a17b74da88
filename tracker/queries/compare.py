"""Two jobs side by side: every verdict of both, the deltas behind them, and regressions.

Verdicts are matched by check and subject, so probes pair up by model and variant and arms by
arm name (variant and seed). The gate fails closed and does not fire on noise:

* a check that passed in the first job and is gone or N/A in the second is a regression
  (rule ``fail closed``): a results file that went missing must not pass a gate;
* deterministic checks (bytes/param, failed probes, Table 4, divergence): PASS -> FAIL, a new
  FAIL of a subject that passed before (a probe now out of memory), or a bytes/param figure
  that rose by more than the expectations' bytes/param tolerance (rule ``deterministic``);
* stochastic checks (``ema_delta_vs_seed_noise``, ``val_loss``): PASS -> FAIL is a regression
  only when the new value lies beyond the seed noise pooled over all jobs of the database
  (rule ``seed noise``, a one-sided prediction bound at the ``[gate]`` alpha), or, with too
  few jobs to pool, beyond the ``[gate]`` margins (rule ``margin``). Otherwise the change is
  ``noise``. docs/claims.md has the formulas.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.analysis.job import analyze_job
from tracker.analysis.stats import t_quantile
from tracker.analysis.verdict import FAIL, NA, PASS, Verdict
from tracker.domain import ArmName, Change
from tracker.models import Job, Run
from tracker.queries.derived import load_derived
from tracker.store.jobdata import load_job_data
from tracker.summary.model import SEED_NOISE

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

BPP_CHECKS = ("bpp_params", "bpp_state", "bpp_grads")
EMA_CHECK = "ema_delta_vs_seed_noise"
VAL_LOSS_CHECK = "val_loss"
CHANGES = tuple(Change)  # in table order


@dataclass
class Comparison:
    job_a: str
    job_b: str
    table: pl.DataFrame  # one row per (check, subject) present in either job
    regressions: list[str]  # one line each

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def summary(self) -> str:
        """'N regressions from A to B (every kind of change counted)'."""
        counts = {change: 0 for change in CHANGES}
        for change in self.table["change"]:
            counts[change] += 1
        n = counts[Change.REGRESSED]
        kinds = ", ".join(f"{count} {change}" for change, count in counts.items())
        return f"{n} regression{'' if n == 1 else 's'} from {self.job_a} to {self.job_b} ({kinds})"


@dataclass(frozen=True)
class SeedNoise:
    """Seed noise pooled over all jobs: each job's seed-noise EMA delta, and the final
    validation losses of every run per variant."""

    ema: Sequence[float] = ()
    val_loss: dict[str, list[float]] = field(default_factory=dict)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _upper_bound(values: Sequence[float], alpha: float) -> float:
    """One-sided (1 - alpha) upper prediction bound of one more draw like ``values``:
    mean + t_(1-alpha, n-1) * sd * sqrt(1 + 1/n)."""
    n = len(values)
    sd = statistics.stdev(values)
    return statistics.fmean(values) + t_quantile(1 - alpha, n - 1) * sd * math.sqrt(1 + 1 / n)


def _stochastic(a: Verdict, b: Verdict, exp: Expectations, noise: SeedNoise) -> tuple[bool, str]:
    """Whether a stochastic PASS -> FAIL is beyond the noise, and the rule that decided."""
    gate = exp.gate
    after, before = _number(b.measured), _number(a.measured)
    if a.check == EMA_CHECK:
        pool = [v for v in noise.ema if v > 0 and math.isfinite(v)]
        if after is None or not math.isfinite(after):
            return True, "deterministic: the EMA delta is not a number"
        factor = exp.training.noise_factor
        if len(pool) >= gate.min_noise_jobs:
            # seed-noise deltas are positive and skewed: the bound is taken on their logs
            bound = factor * math.exp(_upper_bound([math.log(v) for v in pool], gate.alpha))
            return after > bound, (
                f"seed noise: {after:.5f} vs {bound:.5f}, the one-sided {1 - gate.alpha:.1%} "
                f"bound of {factor:g}x the seed noise of {len(pool)} jobs"
            )
        mean = statistics.fmean(pool) if pool else _number(b.expected) or 0.0
        limit = gate.ema_margin_factor * mean
        return after > limit, (
            f"margin: {after:.5f} vs {limit:.5f} = {gate.ema_margin_factor:g}x the mean seed "
            f"noise of {len(pool)} jobs (fewer than {gate.min_noise_jobs} to test against)"
        )
    if after is None or before is None or not math.isfinite(after):
        return True, "deterministic: the validation loss is not a number"
    rise = after - before
    arm = ArmName.find(b.subject)
    pool = noise.val_loss.get(arm.variant, []) if arm is not None else []
    pool = [v for v in pool if math.isfinite(v)]
    if len(pool) >= gate.min_noise_jobs:
        # the difference of two runs varies sqrt(2) times as much as one run
        spread = _upper_bound(pool, gate.alpha) - statistics.fmean(pool)
        limit = spread * math.sqrt(2)
        return rise > limit, (
            f"seed noise: rise {rise:+.4f} vs {limit:.4f}, the one-sided {1 - gate.alpha:.1%} "
            f"bound of a difference of two runs over {len(pool)} runs"
        )
    return rise > gate.val_loss_margin, (
        f"margin: rise {rise:+.4f} vs {gate.val_loss_margin:g} (fewer than "
        f"{gate.min_noise_jobs} runs to test against)"
    )


def _change(
    a: Verdict | None,
    b: Verdict | None,
    exp: Expectations,
    passed: set[str],
    noise: SeedNoise,
) -> tuple[Change, str | None]:
    """The kind of change and, for a regression or noise, the rule that decided."""
    if a is None:
        assert b is not None
        # a subject that passed something before and now fails anew (a probe now out of memory)
        if b.status == FAIL and b.subject in passed:
            return Change.REGRESSED, "deterministic: a new FAIL of a subject that passed before"
        return Change.NEW, None
    if a.status == PASS and (b is None or b.status == NA):
        return Change.REGRESSED, f"fail closed: PASS -> {'gone' if b is None else 'N/A'}"
    if b is None:
        return Change.GONE, None
    if a.status == PASS and b.status == FAIL:
        if a.check in (EMA_CHECK, VAL_LOSS_CHECK):
            beyond, rule = _stochastic(a, b, exp, noise)
            return (Change.REGRESSED if beyond else Change.NOISE), rule
        return Change.REGRESSED, "deterministic: PASS -> FAIL"
    if a.status == FAIL and b.status == PASS:
        return Change.FIXED, None
    rise = _delta(a, b)
    tolerance = exp.memory.bpp_tolerance
    if a.check in BPP_CHECKS and rise is not None and rise > tolerance:
        return Change.REGRESSED, f"deterministic: bytes/param rose by more than {tolerance:g}"
    return (Change.SAME if a.status == b.status else Change.CHANGED), None


def _delta(a: Verdict | None, b: Verdict | None) -> float | None:
    before = _number(a.measured) if a else None
    after = _number(b.measured) if b else None
    return None if before is None or after is None else after - before


def pooled_noise(session: Session, exp: Expectations, judged: str) -> SeedNoise:
    """Seed noise of every job in the database but the one judged (a shifted job must not
    widen the noise it is judged against), from the rows kept at ingest."""
    ids = list(session.scalars(select(Job.id).where(Job.name != judged)))
    derived = load_derived(session, ids, exp)
    ema = [value for d in derived.values() if (value := d.numbers.get(SEED_NOISE)) is not None]
    val_loss: dict[str, list[float]] = {}
    for variant, value in session.execute(
        select(Run.variant, Run.val_loss).where(Run.val_loss.is_not(None), Run.job_id.in_(ids))
    ):
        if value is not None:
            val_loss.setdefault(variant, []).append(value)
    return SeedNoise(ema, val_loss)


def compare_jobs(session: Session, job_a: str, job_b: str, exp: Expectations) -> Comparison:
    """Analyse two jobs and compare their verdicts."""
    verdicts_a, verdicts_b = (
        analyze_job(load_job_data(session, job), exp).verdicts for job in (job_a, job_b)
    )
    return compare_verdicts(
        job_a, verdicts_a, job_b, verdicts_b, exp, pooled_noise(session, exp, job_b)
    )


def compare_verdicts(
    job_a: str,
    verdicts_a: Iterable[Verdict],
    job_b: str,
    verdicts_b: Iterable[Verdict],
    exp: Expectations,
    noise: SeedNoise | None = None,
) -> Comparison:
    """Compare verdicts already computed (the report has them at hand). Without ``noise``
    the stochastic checks are judged by the margins."""
    verdicts = [{(v.check, v.subject): v for v in found} for found in (verdicts_a, verdicts_b)]
    keys = list(verdicts[0]) + [key for key in verdicts[1] if key not in verdicts[0]]
    passed = {subject for (_, subject), v in verdicts[0].items() if v.status == PASS}
    rows = []
    for key in keys:
        a, b = verdicts[0].get(key), verdicts[1].get(key)
        either = b or a
        assert either is not None
        change, rule = _change(a, b, exp, passed, noise or SeedNoise())
        rows.append(
            {
                "check": key[0],
                "subject": key[1],
                "status_a": a.status if a else None,
                "status_b": b.status if b else None,
                "measured_a": _number(a.measured) if a else None,
                "measured_b": _number(b.measured) if b else None,
                "delta": _delta(a, b),
                "expected": _number(either.expected),
                "tolerance": either.tolerance,
                "change": change,
                "rule": rule,
            }
        )
    table = pl.DataFrame(
        rows,
        schema={
            "check": pl.String,
            "subject": pl.String,
            "status_a": pl.String,
            "status_b": pl.String,
            "measured_a": pl.Float64,
            "measured_b": pl.Float64,
            "delta": pl.Float64,
            "expected": pl.Float64,
            "tolerance": pl.Float64,
            "change": pl.String,
            "rule": pl.String,
        },
    )
    regressions = [
        f"{row['check']} {row['subject']}: {row['status_a'] or 'absent'} -> "
        f"{row['status_b'] or 'gone'}"
        + (f" (delta {row['delta']:+.4g})" if row["delta"] is not None else "")
        + f"; {row['rule']}"
        for row in table.filter(pl.col("change") == Change.REGRESSED).iter_rows(named=True)
    ]
    return Comparison(job_a, job_b, table, regressions)
