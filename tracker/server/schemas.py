"""What the JSON routes return, as pydantic models: the response schemas of ``/openapi.json``.

The routes still answer with ``TrackerJSON`` (``responses.py``), so a body is exactly the
CLI's ``--format json``; these models describe it. A measured number is a JSON number, or
``null`` for NaN or a missing value, or the string ``"Infinity"`` / ``"-Infinity"``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Number = Annotated[
    float | str | None,
    Field(description='A number; null for NaN or none; "Infinity" or "-Infinity".'),
]


class JobRow(BaseModel):
    """One job of ``/api/jobs``, in job order (``time`` metadata, else ingest time)."""

    job: str
    time: datetime
    ingested_at: datetime
    probes: int
    failed_probes: int
    arms: int
    points: int
    meta: str = Field(description="KEY=VALUE pairs, space-separated, by key.")
    source: str


class ProbeRow(BaseModel):
    model: str
    variant: str
    n_params: int | None
    bpp_params: Number
    bpp_state: Number
    bpp_grads: Number
    bpp_total: Number
    peak_steady: int | None
    error: str | None


class ArmRow(BaseModel):
    arm: str
    model: str
    variant: str
    seed: int | None
    points: int
    last_loss: Number
    min_loss: Number
    val_loss: Number
    final_loss: Number
    diverged: bool | None


class CurveRow(BaseModel):
    arm: str
    metric: str
    points: int
    first_step: int | None
    last_step: int | None


class Verdict(BaseModel):
    check: str
    subject: str
    measured: Number
    expected: Number
    tolerance: Number
    status: str
    detail: str


class JobDetail(BaseModel):
    """``/api/jobs/NAME``: a job's metadata, probes, arms, curves and verdicts."""

    job: str
    meta: dict[str, str]
    probes: list[ProbeRow]
    arms: list[ArmRow]
    curves: list[CurveRow]
    verdicts: list[Verdict]


class ClaimRow(BaseModel):
    """One claim and subject; with ``group_by`` the group's label comes first."""

    model_config = ConfigDict(extra="allow")

    group: str | None = None
    claim: str
    subject: str
    statement: str
    status: str
    n_jobs: int
    n_samples: int
    estimate: Number
    ci_low: Number
    ci_high: Number
    interval: str | None = None  # "90% Welch", "95% binomial" or "range" (over the jobs)
    expected: Number
    tolerance: Number
    jobs_failing: list[str]
    detail: str


class ComparisonRow(BaseModel):
    check: str
    subject: str
    status_a: str | None
    status_b: str | None
    measured_a: Number
    measured_b: Number
    delta: Number
    expected: Number
    tolerance: Number
    change: str
    rule: str | None


class Comparison(BaseModel):
    """``/api/compare``: two jobs' verdicts side by side, and the regressions as lines."""

    a: str
    b: str
    regressions: list[str]
    table: list[ComparisonRow]


class TrendRow(BaseModel):
    """One job (and model, variant) of a trend; ``group_by`` adds a column per key, a run
    field its seeds' ``std`` and ``seeds``."""

    model_config = ConfigDict(extra="allow")

    job: str
    time: datetime
    model: str
    variant: str
    value: Number
    change: Number


class CurveWindow(BaseModel):
    """``/api/curve``: one curve's points in a window, downsampled to at most ``points``."""

    job: str
    arm: str
    metric: str
    first_step: int | None
    last_step: int | None
    total: int
    start: int | None
    end: int | None
    in_window: int
    raw: bool
    step: list[int] | None = Field(None, description="Absent when the curve has no points.")
    value: list[Number] | None = Field(None, description="Absent when the curve has no points.")
