"""Two jobs side by side: every verdict of both, the deltas behind them, and regressions.

Verdicts are matched by check and subject, so probes pair up by model and variant and arms by
arm name (variant and seed). The gate compares what both jobs have, fails closed on evidence
lost, and does not fire on noise (docs/claims.md, "The regression gate", has the formulas):

* a check gone from the second job (absent, or turned N/A) is a regression only when the
  second job lost all evidence for its subject: no arm of the variant left, a probe that
  existed gone (rule ``fail closed``); otherwise it is ``gone`` (fewer seeds, a probe dropped
  for one model but kept for others is still judged by its remaining checks);
* every numeric check but the EMA tracking is judged against its yardstick: the comparable
  jobs (``tracker.queries.yardsticks``: neither compared job, the same check and subject,
  the compared jobs' configuration, run length included) and the check's tolerance
  (``tracker.analysis.gate``). A value beyond both is a regression; a PASS -> FAIL within
  them is ``noise``, listed with the regressions (``Comparison.within_noise``), one on a
  value that fell as far (a design that needs less memory) is ``changed``, never a
  regression. Checks with neither, or without a number (failed probes, divergence), fall
  back to the status;
* the EMA tracking check keeps its seed-noise test against the comparable jobs' seed noise.

The table lists the rows in ``Change`` order, regressions first and ``same`` last.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlalchemy.orm import Session

from tracker.analysis.checks import BPP, Check
from tracker.analysis.gate import Judged, Rise, judge_ema, judge_rise, signed
from tracker.analysis.job import analyze_job
from tracker.analysis.verdict import FAIL, NA, PASS, Verdict
from tracker.domain import ArmName, Change
from tracker.errors import JobOfOtherStudy
from tracker.queries.job_analysis import study_judging
from tracker.queries.yardsticks import (
    KeptVerdicts,
    OtherJobs,
    Where,
    checked_where,
    kept_verdicts,
)
from tracker.store.catalog import get_job
from tracker.store.jobdata import load_job_data

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

BPP_CHECKS = tuple(BPP.values())
EMA_CHECK = Check.EMA_DELTA_VS_SEED_NOISE
VAL_LOSS_CHECK = Check.VAL_LOSS
CHANGES = tuple(Change)  # the one order of the kinds of change: tables, tallies, pages


@dataclass
class Comparison:
    job_a: str
    job_b: str
    table: pl.DataFrame  # one row per (check, subject) present in either job, in CHANGES order
    regressions: list[str]  # one line each
    within_noise: list[str]  # PASS -> FAIL within the noise, one line each: never hidden

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def counts(self) -> dict[Change, int]:
        """Rows per kind of change, every kind, in CHANGES order."""
        counts = dict.fromkeys(CHANGES, 0)
        for change in self.table["change"]:
            counts[Change(change)] += 1
        return counts

    def outcome_line(self) -> str:
        """'N regressions from A to B (every kind of change counted)'."""
        counts = self.counts()
        n = counts[Change.REGRESSED]
        kinds = ", ".join(f"{count} {change}" for change, count in counts.items())
        return f"{n} regression{'' if n == 1 else 's'} from {self.job_a} to {self.job_b} ({kinds})"

    def changes_only(self) -> Comparison:
        """The same comparison without its ``same`` rows."""
        return replace(self, table=self.table.filter(pl.col("change") != Change.SAME))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _unit(check: str) -> str:
    if check in BPP_CHECKS:
        return " B/param"
    if check.startswith("val_loss"):
        return " nats"
    return " GiB" if check.endswith("_gib") else ""


def _tolerance(a: Verdict, b: Verdict, exp: Expectations) -> float | None:
    """The check's own tolerance: its margin for the validation loss, else the first
    job's verdict's (a bytes/param tolerance with that job's fixed overhead), else the second's."""
    if a.check == VAL_LOSS_CHECK:
        return exp.training.val_loss.candidate_margin
    found = a.tolerance if a.tolerance is not None else b.tolerance
    return float(found) if found is not None else None


@dataclass(frozen=True)
class _Seeds:
    """The second job's validation-loss rows: how many (they share the level) and the
    variance of one in seed variances, 1 + 1/(its baseline seeds)."""

    rows: int = 1
    factor: float | None = None

    @classmethod
    def of(cls, verdicts: Iterable[Verdict], exp: Expectations) -> _Seeds:
        baseline = ArmName.find(exp.training.baseline)
        rows = base = 0
        for v in verdicts:
            rows += v.check == VAL_LOSS_CHECK
            arm = ArmName.find(v.subject) if v.check == Check.VAL_LOSS_PAPER else None
            value = _number(v.measured)
            finite = value is not None and math.isfinite(value)
            base += bool(arm and baseline and arm.variant == baseline.variant and finite)
        return cls(max(rows, 1), 1 + 1 / base if base else None)


def _against_others(a: Verdict, b: Verdict, exp: Expectations, context: _Context) -> Judged | None:
    """A numeric check judged by its yardstick; None when it cannot tell (the status decides)."""
    before, after = _number(a.measured), _number(b.measured)
    if before is None or after is None:
        return None
    stick = context.others.yardstick((a.check, a.subject))
    loss = a.check == VAL_LOSS_CHECK
    rise = Rise(
        before,
        after,
        _tolerance(a, b, exp),
        _unit(a.check),
        failed=b.status == FAIL,
        seed_factor=context.seeds.factor if loss else None,
        rows=context.seeds.rows if loss else 1,
        meta=context.others.own,
    )
    return judge_rise(rise, stick, exp.gate)


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
    seeds: _Seeds  # of the second job


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
            pool = context.others.seed_noise()
            beyond, why = judge_ema(_number(b.measured), _number(b.expected), pool, exp)
            return (Change.REGRESSED if beyond else Change.NOISE), why
        judged = None
    else:
        judged = _against_others(a, b, exp, context)
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


def _delta(a: Verdict | None, b: Verdict | None) -> float | None:
    before = _number(a.measured) if a else None
    after = _number(b.measured) if b else None
    return None if before is None or after is None else after - before


def compare_jobs(
    session: Session,
    job_a: str,
    job_b: str,
    exp: Expectations,
    where: Where | None = None,
    study: str | None = None,
) -> Comparison:
    """Analyse two jobs, each judged by ``exp.judging`` its study, and compare their verdicts
    against the jobs of the second one's study comparable to them (``where``: those with this
    metadata instead); the gate is the second job's study's. ``study``: both jobs must be of
    it (else ``JobOfOtherStudy``)."""
    studies = [get_job(session, job).study for job in (job_a, job_b)]
    for job, actual in zip((job_a, job_b), studies, strict=True):
        if study is not None and actual != study:
            raise JobOfOtherStudy(job=job, actual=actual, study=study)
    verdicts_a, verdicts_b = (
        analyze_job(load_job_data(session, job), study_judging(session, exp, study)).verdicts
        for job, study in zip((job_a, job_b), studies, strict=True)
    )

    def kept(gate: Expectations) -> KeptVerdicts:
        return kept_verdicts(session, gate, studies[1])

    return compare_in_study(
        session, exp, (job_a, verdicts_a), (job_b, verdicts_b), studies[1], kept, where
    )


def compare_in_study(
    session: Session,
    exp: Expectations,
    a: tuple[str, Iterable[Verdict]],
    b: tuple[str, Iterable[Verdict]],
    study: str,
    kept: Callable[[Expectations], KeptVerdicts],
    where: Where | None = None,
) -> Comparison:
    """Two jobs' verdicts (each a name and its verdicts) compared as ``tracker compare`` does:
    against the jobs of ``study`` (the second one's) comparable to them, by its gate
    (``exp.judging`` it); ``kept``: that study's kept verdicts for the gate (``kept_verdicts``,
    or those a page has kept); ``where``: its ``--baseline-where``."""
    gate = study_judging(session, exp, study)
    compared = (a[0], b[0])
    others = kept(gate).comparable(compared, gate.gate.configuration, checked_where(session, where))
    return compare_verdicts(a[0], a[1], b[0], b[1], gate, others)


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
    every check is judged by its tolerance or its status, as with no other job."""
    verdicts = [{(v.check, v.subject): v for v in found} for found in (verdicts_a, verdicts_b)]
    keys = list(verdicts[0]) + [key for key in verdicts[1] if key not in verdicts[0]]
    passed = frozenset(subject for (_, subject), v in verdicts[0].items() if v.status == PASS)
    seeds = _Seeds.of(verdicts[1].values(), exp)
    context = _Context(passed, Evidence.of(verdicts[1].values()), others or OtherJobs(), seeds)
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
    rows.sort(key=lambda row: CHANGES.index(row["change"]))  # stable: checks in job order
    schema = {name: getattr(pl, dtype) for name, dtype in SCHEMA.items()}
    table = pl.DataFrame(rows, schema=schema)
    return Comparison(
        job_a, job_b, table, _lines(table, Change.REGRESSED), _lines(table, Change.NOISE)
    )


def _lines(table: pl.DataFrame, change: Change) -> list[str]:
    """The rows of ``change`` (of noise: those that flipped PASS -> FAIL), one line each:
    'check subject: PASS -> FAIL (delta +0.5); rule'."""
    rows = table.filter(pl.col("change") == change)
    if change == Change.NOISE:
        rows = rows.filter((pl.col("status_a") == PASS) & (pl.col("status_b") == FAIL))
    return [
        f"{row['check']} {row['subject']}: {row['status_a'] or 'absent'} -> "
        f"{row['status_b'] or 'gone'}"
        + (f" (delta {signed(row['delta'])})" if row["delta"] is not None else "")
        + f"; {row['rule']}"
        for row in rows.iter_rows(named=True)
    ]
