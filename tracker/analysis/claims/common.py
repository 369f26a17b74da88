"""A claim, the columns of the claims table, and the helpers every kind of claim uses."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracker.domain import ClaimStatus

REPRODUCED = ClaimStatus.REPRODUCED
NOT_REPRODUCED = ClaimStatus.NOT_REPRODUCED
MIXED = ClaimStatus.MIXED
INCONCLUSIVE = ClaimStatus.INCONCLUSIVE
COLUMNS: dict[str, Any] = {
    "claim": pl.String,
    "subject": pl.String,
    "statement": pl.String,
    "status": pl.String,
    "n_jobs": pl.Int64,
    "n_samples": pl.Int64,
    "estimate": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "interval": pl.String,
    "expected": pl.Float64,
    "tolerance": pl.Float64,
    "jobs_failing": pl.List(pl.String),
    "detail": pl.String,
    "next_runs": pl.String,
    "known": pl.Boolean,
}


@dataclass
class Claim:
    claim: str
    subject: str
    statement: str
    status: ClaimStatus
    n_jobs: int
    n_samples: int
    estimate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    expected: float | None = None
    tolerance: float | None = None
    jobs_failing: list[str] = field(default_factory=list)
    detail: str = ""
    # what ci_low..ci_high is: a "90% confidence sequence", a "95% binomial" interval, or a
    # "range" over jobs
    interval: str | None = None
    # INCONCLUSIVE: what would decide it ("run 3 more flash and 3 more ref seeds ..."), else ""
    next_runs: str = ""
    # every job that judged it has it KNOWN: a setup difference the expectations name, not a
    # failure to reproduce
    known: bool = False


def num(value: float | None, digits: int = 4) -> str:
    """A number for a claim's text, ``digits`` significant digits; "n/a" if missing."""
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def some_jobs(names: Sequence[str], limit: int = 8) -> str:
    """The first ``limit`` job names, and how many more there are."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def finite_float(value: Any) -> float | None:
    """``value`` as a float, None when it is missing or not finite."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


RANGE = "range"  # the interval of a claim that is the minimum to maximum over the jobs


def spread(values: pl.Series) -> tuple[float | None, float | None, float | None]:
    """Median, minimum and maximum; None for an empty series."""
    if values.len() == 0:
        return None, None, None
    return finite_float(values.median()), finite_float(values.min()), finite_float(values.max())


def finite_rows(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """The rows of ``frame`` whose ``column`` is a finite number."""
    return frame.filter(pl.col(column).is_not_null() & pl.col(column).is_finite())


@dataclass(frozen=True)
class Evidence:
    """What the claims judge, one row per job and item (tracker.analysis.claims' docstring):
    the jobs' own ``verdicts``, their derived ``numbers``, their ``runs`` and ``meta``."""

    verdicts: pl.DataFrame
    numbers: pl.DataFrame
    runs: pl.DataFrame
    meta: pl.DataFrame
