"""Two jobs side by side: every verdict of both, the deltas behind them, and regressions.

Verdicts are matched by check and subject, so probes pair up by model and variant and arms by
arm name (variant and seed). A regression is a verdict that went from PASS to FAIL, a new FAIL
of a subject that passed before (a probe now out of memory), or a bytes/param figure that rose
by more than the expectations' bytes/param tolerance, with or without an analytic value.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from tracker.analysis.job import analyze_job
from tracker.analysis.verdict import FAIL, PASS, Verdict
from tracker.store.jobdata import load_job_data

if TYPE_CHECKING:
    import polars as pl

    from tracker.analysis.expectations import Expectations

BPP_CHECKS = ("bpp_params", "bpp_state", "bpp_grads")


@dataclass
class Comparison:
    job_a: str
    job_b: str
    table: pl.DataFrame  # one row per (check, subject) present in either job
    regressions: list[str]  # one line each

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _change(a: Verdict | None, b: Verdict | None, bpp_tolerance: float, passed: set[str]) -> str:
    if a is None:
        assert b is not None
        # a subject that passed something before and now fails anew (a probe now out of memory)
        return "regressed" if b.status == FAIL and b.subject in passed else "new"
    if b is None:
        return "gone"
    if a.status == PASS and b.status == FAIL:
        return "regressed"
    if a.status == FAIL and b.status == PASS:
        return "fixed"
    rise = _delta(a, b)
    if a.check in BPP_CHECKS and rise is not None and rise > bpp_tolerance:
        return "regressed"
    return "same" if a.status == b.status else "changed"


def _delta(a: Verdict | None, b: Verdict | None) -> float | None:
    before = _number(a.measured) if a else None
    after = _number(b.measured) if b else None
    return None if before is None or after is None else after - before


def compare_jobs(session: Session, job_a: str, job_b: str, exp: Expectations) -> Comparison:
    """Analyse two jobs and compare their verdicts."""
    verdicts_a, verdicts_b = (
        analyze_job(load_job_data(session, job), exp).verdicts for job in (job_a, job_b)
    )
    return compare_verdicts(job_a, verdicts_a, job_b, verdicts_b, exp)


def compare_verdicts(
    job_a: str,
    verdicts_a: Iterable[Verdict],
    job_b: str,
    verdicts_b: Iterable[Verdict],
    exp: Expectations,
) -> Comparison:
    """Compare verdicts already computed (the report has them at hand)."""
    import polars as pl

    verdicts = [{(v.check, v.subject): v for v in found} for found in (verdicts_a, verdicts_b)]
    keys = list(verdicts[0]) + [key for key in verdicts[1] if key not in verdicts[0]]
    passed = {subject for (_, subject), v in verdicts[0].items() if v.status == PASS}
    rows = []
    for key in keys:
        a, b = verdicts[0].get(key), verdicts[1].get(key)
        either = b or a
        assert either is not None
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
                "change": _change(a, b, exp.memory.bpp_tolerance, passed),
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
        },
    )
    regressions = [
        f"{row['check']} {row['subject']}: {row['status_a'] or 'absent'} -> {row['status_b']}"
        + (f" (delta {row['delta']:+.4g})" if row["delta"] is not None else "")
        for row in table.filter(pl.col("change") == "regressed").iter_rows(named=True)
    ]
    return Comparison(job_a, job_b, table, regressions)
