"""Two jobs side by side: every verdict of both, the deltas behind them, and regressions.

Verdicts are matched by check and subject, so probes pair up by model and variant and arms by
arm name (variant and seed). The gate compares what both jobs have, fails closed on evidence
lost, and does not fire on noise (docs/claims.md, "The regression gate", has the formulas):

* a check gone from the second job (absent, or turned N/A) is a regression only when the
  second job lost all evidence for its subject: no arm of the variant left, a probe that
  existed gone (rule ``fail closed``); otherwise it is ``gone`` (fewer seeds, a probe dropped
  for one model but kept for others is still judged by its remaining checks);
* every numeric check but the EMA tracking is judged against the other jobs of the database
  (all but the two compared): a rise beyond ``[gate] spread_factor`` standard deviations of
  their values for that check and subject, to a value above all of theirs (rule ``spread``);
  where fewer than ``[gate] min_noise_jobs`` jobs have a value, or they show no spread, a rise
  beyond the check's floor (``bpp_floor``, ``val_loss_floor``; rule ``floor``); a check with
  neither falls back to the status, PASS -> FAIL (rule ``status``), as do checks without a
  number (failed probes, divergence). A PASS -> FAIL within the spread is ``noise``; one on a
  value that fell (a design that needs less memory) is ``changed``, never a regression;
* the EMA tracking check keeps its seed-noise test: PASS -> FAIL is a regression only beyond
  the one-sided bound of the seed noise pooled over the other jobs (rule ``seed noise``), or,
  with too few jobs, beyond the ``[gate]`` margin (rule ``margin``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.analysis.job import analyze_job
from tracker.analysis.stats import t_quantile
from tracker.analysis.verdict import FAIL, NA, PASS, Verdict
from tracker.domain import ArmName, Change
from tracker.models import Job
from tracker.queries.derived import load_verdict_rows
from tracker.store.jobdata import load_job_data
from tracker.summary.model import SEED_NOISE

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations, GateExpectations

BPP_CHECKS = ("bpp_params", "bpp_state", "bpp_grads")
EMA_CHECK = "ema_delta_vs_seed_noise"
VAL_LOSS_CHECK = "val_loss"
CHANGES = tuple(Change)  # in table order
Key = tuple[str, str]  # (check, subject)


@dataclass
class Comparison:
    job_a: str
    job_b: str
    table: pl.DataFrame  # one row per (check, subject) present in either job
    regressions: list[str]  # one line each

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def outcome_line(self) -> str:
        """'N regressions from A to B (every kind of change counted)'."""
        counts = {change: 0 for change in CHANGES}
        for change in self.table["change"]:
            counts[change] += 1
        n = counts[Change.REGRESSED]
        kinds = ", ".join(f"{count} {change}" for change, count in counts.items())
        return f"{n} regression{'' if n == 1 else 's'} from {self.job_a} to {self.job_b} ({kinds})"


@dataclass(frozen=True)
class OtherJobs:
    """What the jobs other than the two compared show: each job's seed-noise EMA delta, and
    the measured values of every (check, subject), one per job."""

    ema: Sequence[float] = ()
    measured: Mapping[Key, Sequence[float]] = field(default_factory=dict)


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


def _ema(b: Verdict, exp: Expectations, others: OtherJobs) -> tuple[bool, str]:
    """Whether the EMA check's PASS -> FAIL is beyond the seed noise, and the rule that decided."""
    gate = exp.gate
    after = _number(b.measured)
    pool = [v for v in others.ema if v > 0 and math.isfinite(v)]
    if after is None or not math.isfinite(after):
        return True, "status: the EMA delta is not a number"
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


def _jobs(n: int) -> str:
    return f"{n} other job{'' if n == 1 else 's'}"


def _floor(check: str, gate: GateExpectations) -> tuple[float, str] | None:
    """The check's floor and its unit, where the expectations name one."""
    if check in BPP_CHECKS:
        return gate.bpp_floor, " B/param"
    if check == VAL_LOSS_CHECK:
        return gate.val_loss_floor, " nats"
    return None


@dataclass(frozen=True)
class Judged:
    """A numeric check against the other jobs: ``rose`` beyond what they show (a regression),
    ``fell`` as far below (a change, never noise), and the rule that decided."""

    rose: bool
    fell: bool
    rule: str


def _against_others(
    a: Verdict, b: Verdict, gate: GateExpectations, others: OtherJobs
) -> Judged | None:
    """A numeric check judged by the other jobs' spread, else by its floor; None when neither
    can tell (the status decides)."""
    before, after = _number(a.measured), _number(b.measured)
    if before is None or after is None:
        return None
    if not math.isfinite(after):
        return Judged(math.isfinite(before), False, f"status: {_plain(after)} after {before}")
    rise = after - before
    values = [v for v in others.measured.get((a.check, a.subject), ()) if math.isfinite(v)]
    n = len(values)
    sd = statistics.stdev(values) if n >= 2 else 0.0
    if n >= gate.min_noise_jobs and sd > 0:
        limit, top = gate.spread_factor * sd, max(values)
        rule = (
            f"spread of {_jobs(n)}: rise {_signed(rise)} vs {gate.spread_factor:g} sd = "
            f"{limit:.4g}, their max {top:.6g}"
        )
        return Judged(rise > limit and after > top, -rise > limit and after < min(values), rule)
    floor = _floor(a.check, gate)
    if floor is None:
        return None
    why = _jobs(n) if n < gate.min_noise_jobs else f"{_jobs(n)}, all equal"
    rule = f"floor {floor[0]:g}{floor[1]} ({why}): rise {_signed(rise)}"
    return Judged(rise > floor[0], -rise > floor[0], rule)


@dataclass(frozen=True)
class Evidence:
    """What the second job still holds: subjects and arm variants with a verdict not N/A."""

    subjects: frozenset[str]
    variants: frozenset[str]

    @classmethod
    def of(cls, verdicts: Iterable[Verdict]) -> Evidence:
        judged = {v.subject for v in verdicts if v.status != NA}
        arms = (ArmName.find(subject) for subject in judged)
        return cls(frozenset(judged), frozenset(arm.variant for arm in arms if arm))

    def lost(self, subject: str) -> str | None:
        """Why nothing is left of ``subject``, or None when something is."""
        arm = ArmName.find(subject)
        if arm is not None:
            return None if arm.variant in self.variants else f"no {arm.variant} arm left"
        if subject in self.subjects:
            return None
        return f"probe {subject} gone" if "/" in subject else f"nothing left of {subject}"

    def kept(self, subject: str) -> str:
        arm = ArmName.find(subject)
        return f"{arm.variant} still has arms" if arm else f"{subject} still judged"


@dataclass(frozen=True)
class _Context:
    passed: frozenset[str]  # subjects with a PASS in the first job
    evidence: Evidence  # of the second job
    others: OtherJobs


def _change(
    a: Verdict | None, b: Verdict | None, exp: Expectations, context: _Context
) -> tuple[Change, str | None]:
    """The kind of change and the rule that decided it."""
    if a is None:
        assert b is not None
        # a subject that passed something before and now fails anew (a probe now out of memory)
        if b.status == FAIL and b.subject in context.passed:
            return Change.REGRESSED, "status: a new FAIL of a subject that passed before"
        return Change.NEW, None
    if b is None or (b.status == NA and a.status != NA):
        after = "gone" if b is None else "N/A"
        lost = context.evidence.lost(a.subject)
        if lost is not None and a.status == PASS:
            return Change.REGRESSED, f"fail closed: PASS -> {after}, {lost}"
        return Change.GONE, f"{a.status} -> {after}: {lost or context.evidence.kept(a.subject)}"
    if b.status == NA:  # checked in neither job (a run not of the paper's setup): nothing to judge
        return Change.SAME, None
    if a.check == EMA_CHECK:
        if a.status == PASS and b.status == FAIL:
            beyond, why = _ema(b, exp, context.others)
            return (Change.REGRESSED if beyond else Change.NOISE), why
        judged = None
    else:
        judged = _against_others(a, b, exp.gate, context.others)
    if judged is not None and judged.rose:
        return Change.REGRESSED, judged.rule
    rule = judged.rule if judged else None
    if a.status == PASS and b.status == FAIL:
        if judged is None:
            if (_delta(a, b) or 0.0) < 0:  # less memory, a lower loss: a design, not a loss
                return Change.CHANGED, "status: PASS -> FAIL on a value that fell"
            return Change.REGRESSED, "status: PASS -> FAIL"
        return (Change.CHANGED if judged.fell else Change.NOISE), rule
    if a.status == FAIL and b.status == PASS:
        return Change.FIXED, rule
    return (Change.SAME if a.status == b.status else Change.CHANGED), rule


def _signed(value: float) -> str:
    """A change with its sign, NaN as the README writes it (``+nan`` would read as a rise)."""
    return "NaN" if math.isnan(value) else f"{value:+.4g}"


def _plain(value: float) -> object:
    return "NaN" if math.isnan(value) else value


def _delta(a: Verdict | None, b: Verdict | None) -> float | None:
    before = _number(a.measured) if a else None
    after = _number(b.measured) if b else None
    return None if before is None or after is None else after - before


@dataclass(frozen=True)
class KeptVerdicts:
    """What every job of the database shows, by job id, from the rows kept at ingest: the
    gate's yardstick before the two compared jobs are left out (the server keeps it per
    database state, so a comparison reads no verdict rows)."""

    ids: Mapping[str, int]  # job name -> id
    ema: Mapping[int, float]  # job id -> its seed-noise EMA delta
    measured: Mapping[Key, Sequence[tuple[int, float]]]  # (check, subject) -> (job id, value)

    def without(self, compared: Iterable[str]) -> OtherJobs:
        """The other jobs: a shifted job must not widen the spread it is judged against."""
        left_out = {self.ids[name] for name in compared if name in self.ids}
        ema = [value for job_id, value in self.ema.items() if job_id not in left_out]
        measured = {
            key: [value for job_id, value in values if job_id not in left_out]
            for key, values in self.measured.items()
        }
        return OtherJobs(ema, measured)


def kept_verdicts(session: Session, exp: Expectations) -> KeptVerdicts:
    """Every job's kept verdict values and seed-noise delta (``KeptVerdicts``)."""
    ids = {name: job_id for name, job_id in session.execute(select(Job.name, Job.id))}
    rows, numbers = load_verdict_rows(session, list(ids.values()), exp)
    ema = {
        job_id: value
        for job_id, own in numbers.items()
        if (value := own.get(SEED_NOISE)) is not None
    }
    measured: dict[Key, list[tuple[int, float]]] = {}
    for job_id, check, subject, value, *_ in rows:
        if isinstance(value, float):
            measured.setdefault((check, subject), []).append((job_id, value))
    return KeptVerdicts(ids, ema, measured)


def other_jobs(session: Session, exp: Expectations, compared: Iterable[str]) -> OtherJobs:
    """What every job in the database but the compared ones shows, from the rows kept at
    ingest."""
    return kept_verdicts(session, exp).without(compared)


def compare_jobs(session: Session, job_a: str, job_b: str, exp: Expectations) -> Comparison:
    """Analyse two jobs and compare their verdicts."""
    verdicts_a, verdicts_b = (
        analyze_job(load_job_data(session, job), exp).verdicts for job in (job_a, job_b)
    )
    others = other_jobs(session, exp, (job_a, job_b))
    return compare_verdicts(job_a, verdicts_a, job_b, verdicts_b, exp, others)


SCHEMA = {
    "check": "String",
    "subject": "String",
    "status_a": "String",
    "status_b": "String",
    "measured_a": "Float64",
    "measured_b": "Float64",
    "delta": "Float64",
    "expected": "Float64",
    "tolerance": "Float64",
    "change": "String",
    "rule": "String",
}


def compare_verdicts(
    job_a: str,
    verdicts_a: Iterable[Verdict],
    job_b: str,
    verdicts_b: Iterable[Verdict],
    exp: Expectations,
    others: OtherJobs | None = None,
) -> Comparison:
    """Compare verdicts already computed (the report has them at hand). Without ``others``
    every check is judged by its floor or its status, as with no other job."""
    verdicts = [{(v.check, v.subject): v for v in found} for found in (verdicts_a, verdicts_b)]
    keys = list(verdicts[0]) + [key for key in verdicts[1] if key not in verdicts[0]]
    passed = frozenset(subject for (_, subject), v in verdicts[0].items() if v.status == PASS)
    context = _Context(passed, Evidence.of(verdicts[1].values()), others or OtherJobs())
    rows = []
    for key in keys:
        a, b = verdicts[0].get(key), verdicts[1].get(key)
        either = b or a
        assert either is not None
        change, rule = _change(a, b, exp, context)
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
    schema = {name: getattr(pl, dtype) for name, dtype in SCHEMA.items()}
    table = pl.DataFrame(rows, schema=schema)
    regressions = [
        f"{row['check']} {row['subject']}: {row['status_a'] or 'absent'} -> "
        f"{row['status_b'] or 'gone'}"
        + (f" (delta {_signed(row['delta'])})" if row["delta"] is not None else "")
        + f"; {row['rule']}"
        for row in table.filter(pl.col("change") == Change.REGRESSED).iter_rows(named=True)
    ]
    return Comparison(job_a, job_b, table, regressions)
