"""What the JSON routes return, as pydantic models: the response schemas of ``/openapi.json``.

Each handler returns its route's model; FastAPI validates it and ``TrackerJSON``
(``responses.py``) writes it, so that a body is exactly the CLI's ``--format json``. A
measured number is a JSON number, or ``null`` for a missing value, or the string ``"NaN"``,
``"Infinity"`` or ``"-Infinity"``; a time is ISO 8601 in UTC, to the second.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Self

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    WithJsonSchema,
    model_serializer,
    model_validator,
)

from tracker.jsonio import api_safe, format_time

Number = Annotated[
    int | float | str | None,
    PlainSerializer(api_safe, return_type=int | float | str | None, when_used="json"),
    Field(description='A number; null for NaN or none; "Infinity" or "-Infinity".'),
]
Value = Annotated[
    bool | int | float | str | None,
    PlainSerializer(api_safe, return_type=bool | int | float | str | None, when_used="json"),
    Field(description="A verdict's number, or yes or no (e.g. whether a run diverged)."),
]
Time = Annotated[
    datetime,
    PlainSerializer(format_time, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class Row(BaseModel):
    """A row whose columns a query chose: it holds the columns it was given, written in
    their order (the declared fields are the columns it may have, and their types)."""

    model_config = ConfigDict(extra="allow")
    _given: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        row = handler(data)
        if isinstance(data, Mapping):
            row._given = tuple(data)
        return row

    # no return annotation: the schema stays the declared fields'
    @model_serializer(mode="wrap")
    def _in_given_order(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo):
        written = handler(self)
        if info.mode_is_json():  # the other columns as the API writes them (NaN as "NaN")
            written |= {key: api_safe(value) for key, value in (self.model_extra or {}).items()}
        if not self._given:
            return written
        return {key: written[key] for key in self._given if key in written}


class JobRow(BaseModel):
    """One job of ``/api/jobs``, in job order (``time`` metadata, else ingest time)."""

    job: str
    time: Time
    ingested_at: Time
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
    notes: str = Field(
        "",
        description="What ingest settled or found in the arm's files, '; '-separated: "
        "a resume, restarts, steps logged twice, a cut last line, non-finite stretches, a timer "
        "reset.",
    )
    stopped: str | None = None  # "stopped at step 2765 of 3000": the run did not finish


class CurveRow(BaseModel):
    arm: str
    metric: str
    points: int
    first_step: int | None
    last_step: int | None


class Verdict(BaseModel):
    check: str
    subject: str
    measured: Value
    expected: Value
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


class ClaimRow(Row):
    """One claim and subject; with ``group_by`` the group's label comes first."""

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
    interval: str | None = None  # "90% confidence sequence", "95% binomial" or "range"
    expected: Number
    tolerance: Number
    jobs_failing: list[str]
    detail: str
    next_runs: str = ""  # INCONCLUSIVE: the runs (or jobs) that would decide it
    known: bool = False  # every job has it KNOWN: a setup difference, not a failure


class ComparisonRow(BaseModel):
    check: str
    subject: str
    status_a: str | None
    status_b: str | None
    measured_a: Value
    measured_b: Value
    delta: Number
    expected: Value
    tolerance: Number
    change: str
    rule: str | None


class Comparison(BaseModel):
    """``/api/compare``: two jobs' verdicts side by side, and the regressions as lines (and
    the PASS -> FAIL rows judged within the noise, listed with them)."""

    a: str
    b: str
    regressions: list[str]
    within_noise: list[str]
    table: list[ComparisonRow]


class TrendRow(Row):
    """One job (and model, variant) of a trend; ``group_by`` adds a column per key, a run
    field its seeds' ``std`` and ``seeds``."""

    job: str
    time: Time
    model: str
    variant: str
    value: Number
    change: Number
    expected: Number = Field(description="What the job's study checks the value against.")
    tolerance_lower: Number = Field(description="The lowest value the check allows.")
    tolerance_upper: Number = Field(description="The highest value the check allows.")


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


class ProbeTableRow(Row, ProbeRow):
    """One probe of ``/api/probes`` (``tracker.api.probes``): its job and time first, its
    numbers, ``peak_bpp``; ``group_by`` adds a column per key."""

    job: str
    time: Time
    peak_bpp: Number


class RunTableRow(Row):
    """One arm of ``/api/runs``: the columns chosen (all by default), then one per metadata
    key (``meta.KEY`` for a key named as a column). ``PASS``, ``FAIL``, ``N/A``: its job's
    stored verdicts of each status (null: none stored). ``steps``: how many steps the loss
    curve logged, ``last_step`` the last of them; ``last_loss`` its last value (non-finite
    when the run ended blown up); ``nonfinite`` how many of its points are NaN or infinite."""

    job: str | None = None
    time: Time | None = None
    arm: str | None = None
    model: str | None = None
    variant: str | None = None
    seed: int | None = None
    steps: int | None = None
    last_step: int | None = None
    stopped: str | None = None  # "stopped at step 2765 of 3000": the run did not finish
    final_loss: Number = None
    min_loss: Number = None
    last_loss: Number = None
    nonfinite: int | None = Field(None, description="Loss points that are NaN or infinite.")
    val_loss: Number = None
    diverged: bool | None = None
    notes: str | None = Field(
        "",
        description="What ingest settled or found in the arm's files, '; '-separated: "
        "a resume, restarts, steps logged twice, a cut last line, non-finite stretches, a timer "
        "reset.",
    )


class RunsTable(BaseModel):
    """``/api/runs``: one page of the runs table and how many rows match in all."""

    total: int = Field(description="Rows matching the filters, over every page.")
    offset: int
    limit: int
    columns: list[str]
    rows: list[RunTableRow]


# A plot's arrays stay numpy arrays until written: JSON of a marker no stored text can forge
# and the array's numbers, which ``write_arrays`` puts in place (json's C encoder writes
# them; walked value by value in Python they would take most of an answer's time).
ARRAY_MARK = f"array-{secrets.token_hex(8)}:"
NON_FINITE = re.compile(r"-?Infinity|NaN")  # json's tokens for them, in a list of numbers


def _array_or(as_list: TypeAdapter[Any]) -> Any:
    """A check of a 1-D numpy array of numbers, or of a list (as a client reads it back)."""

    def check(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            if value.ndim != 1 or value.dtype.kind not in "iuf":
                raise ValueError(f"a 1-D array of numbers, not {value.dtype} x {value.shape}")
            return value
        return as_list.validate_python(value)

    return check


def _marked(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ARRAY_MARK + json.dumps(value.tolist(), separators=(",", ":"))
    return value


_STEPS = TypeAdapter(list[int])
_NUMBERS = TypeAdapter(list[Number])
Steps = Annotated[
    Any,
    PlainValidator(_array_or(_STEPS)),
    PlainSerializer(_marked, when_used="json"),
    WithJsonSchema(_STEPS.json_schema()),
]
Numbers = Annotated[
    Any,
    PlainValidator(_array_or(_NUMBERS)),
    PlainSerializer(_marked, when_used="json"),
    WithJsonSchema(_NUMBERS.json_schema()),
]


def write_arrays(text: str) -> str:
    """JSON with each marked array written out, its non-finite numbers as the API's strings."""

    def numbers(found: re.Match[str]) -> str:
        return NON_FINITE.sub(lambda token: f'"{token.group(0)}"', found.group(1))

    return re.sub(f'"{ARRAY_MARK}([^"]*)"', numbers, text)


class PlotMark(BaseModel):
    """A step the run's notes mark on its curve: where it resumed from a checkpoint."""

    step: int
    text: str


class PlotSeries(BaseModel):
    """One run's curve in the window: raw values, and smoothed ones unless ``smooth=0``."""

    job: str
    arm: str
    metric: str
    variant: str
    color: str | None = Field(description="The run's value of the colour key, if any.")
    group: str | None = Field(description="The run's value of the group key, if any.")
    steps: Steps
    values: Numbers
    smoothed: Numbers | None = Field(description="Null when smooth=0.")
    times: Numbers | None = Field(
        description="With x=time: each point's seconds since the run started (null: none)."
    )
    in_window: int = Field(description="Raw points of the curve in the window.")
    downsampled: bool = Field(description="True when min/max downsampled from in_window.")
    marks: list[PlotMark] = Field(
        default_factory=list, description="Where the run resumed (its notes), to mark."
    )


class PlotGroup(BaseModel):
    """A group's mean of its runs' smoothed curves on their common steps; band min to max."""

    label: str
    runs: list[str]
    steps: Steps
    mean: Numbers
    times: Numbers | None = Field(description="With x=time: the runs' mean time per step.")
    low: Numbers | None = Field(description="Min over the runs; null without band=1.")
    high: Numbers | None = Field(description="Max over the runs; null without band=1.")
    downsampled: bool


class Plot(BaseModel):
    """``/api/plot``: one series per run, as the plot page draws them."""

    metric: str
    x: str = Field(description="The x axis: step or time.")
    smooth: float
    smooth_by: str = Field(
        "step", description="step: the EMA per step; point: per logged point (TensorBoard)."
    )
    start: int | None
    end: int | None
    start_s: float | None = Field(description="With x=time: the window's first second.")
    end_s: float | None = Field(description="With x=time: the window's last second.")
    color: str | None
    group: str | None
    band: bool
    series: list[PlotSeries]
    groups: list[PlotGroup]
    y: str = Field(description="The y axis: linear or log.")
