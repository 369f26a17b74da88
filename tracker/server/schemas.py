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
    meta: dict[str, str] = Field(description="The job's metadata, by key.")
    source: str


class ProbeRow(BaseModel):
    model: str
    variant: str
    n_params: int | None
    bpp_params: Number
    bpp_state: Number
    bpp_grads: Number
    bpp_params_state_grads: Number
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


class ProbeTableRow(BaseModel):
    """One probe of ``/api/probes`` (``tracker.api.probes``); ``group_by`` adds a column per
    key."""

    model_config = ConfigDict(extra="allow")

    job: str
    time: datetime
    model: str
    variant: str
    n_params: int | None
    bpp_params: Number
    bpp_state: Number
    bpp_grads: Number
    bpp_params_state_grads: Number
    peak_steady: int | None
    peak_bpp: Number
    error: str | None


class RunTableRow(BaseModel):
    """One arm of ``/api/runs``: the columns chosen (all by default), then one per metadata
    key (``meta.KEY`` for a key named as a column). ``PASS``, ``FAIL``, ``N/A``: its job's
    stored verdicts of each status (null: none stored). ``steps``: the loss curve's last
    step; ``last_loss`` its last value (non-finite when the run ended blown up);
    ``nonfinite`` how many of its points are NaN or infinite."""

    model_config = ConfigDict(extra="allow")

    job: str | None = None
    time: datetime | None = None
    arm: str | None = None
    model: str | None = None
    variant: str | None = None
    seed: int | None = None
    steps: int | None = None
    points: int | None = None
    final_loss: Number = None
    min_loss: Number = None
    last_loss: Number = None
    nonfinite: int | None = Field(None, description="Loss points that are NaN or infinite.")
    val_loss: Number = None
    diverged: bool | None = None


class RunsTable(BaseModel):
    """``/api/runs``: one page of the runs table and how many rows match in all."""

    total: int = Field(description="Rows matching the filters, over every page.")
    offset: int
    limit: int
    columns: list[str]
    rows: list[RunTableRow]


class PlotSeries(BaseModel):
    """One run's curve in the window: raw values, and smoothed ones unless ``smooth=0``."""

    job: str
    arm: str
    metric: str
    variant: str
    color: str | None = Field(description="The run's value of the colour key, if any.")
    group: str | None = Field(description="The run's value of the group key, if any.")
    steps: list[int]
    values: list[Number]
    smoothed: list[Number] | None = Field(description="Null when smooth=0.")
    times: list[Number] | None = Field(
        description="With x=time: each point's seconds since the run started (null: none)."
    )
    in_window: int = Field(description="Raw points of the curve in the window.")
    downsampled: bool = Field(description="True when min/max downsampled from in_window.")


class PlotGroup(BaseModel):
    """A group's mean of its runs' smoothed curves on their common steps; band min to max."""

    label: str
    runs: list[str]
    steps: list[int]
    mean: list[Number]
    times: list[Number] | None = Field(description="With x=time: the runs' mean time per step.")
    low: list[Number] | None = Field(description="Min over the runs; null without band=1.")
    high: list[Number] | None = Field(description="Max over the runs; null without band=1.")
    downsampled: bool


class Plot(BaseModel):
    """``/api/plot``: one series per run, as the plot page draws them."""

    metric: str
    x: str = Field(description="The x axis: step or time.")
    smooth: float
    start: int | None
    end: int | None
    start_s: float | None = Field(description="With x=time: the window's first second.")
    end_s: float | None = Field(description="With x=time: the window's last second.")
    color: str | None
    group: str | None
    band: bool
    y: str = Field(description="The y axis: linear or log.")
    series: list[PlotSeries]
    groups: list[PlotGroup]
