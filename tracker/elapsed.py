"""Time columns of a training log: which one gives a run's wall time, how it is read, and that
time made to run forwards.

A log keeps time in one of three ways, told apart by the column's name and checked by its
shape (the summary a stored curve keeps: ``Shape``):

- elapsed time since the start (``wall_time``, ``elapsed``, ``time``, ``train_time_ms``,
  ``wall_time_s``, ``elapsed_*``): read as logged. It grows: it ends at its highest value, a
  quarter or more above its lowest. A column named so that does not grow holds durations.
- each step's duration (``dt_ms``, ``step_ms``, ``iter_ms``, ``step_time``): summed, each
  logged duration standing for the steps since the previous logged one.
- a running average of the step time (``step_avg_ms``, any name with ``avg`` or ``mean``):
  the elapsed time is the average times the steps done (modded-nanogpt logs
  ``train_time / max(step, 1)``); read only when the run logs neither of the others.

A name ending in ``_ms`` is in milliseconds, else in seconds; another ``*_ms`` column is
elapsed time when it grows, else durations. A logged elapsed time that goes backwards is a
timer reset (modded-nanogpt resets its timer after the warm-up steps): the time after it is
continued from where it was, so that no curve is drawn backwards, and the ingest notes it
(``tracker.jobdir.series``). Where the choice is not plain from the names alone (several time
columns, or a column read by its shape), ``source_line`` says which column and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import numpy as np

MS_SUFFIX = "_ms"  # milliseconds: train_time_ms, dt_ms, step_avg_ms
SECOND_SUFFIXES = ("_s", "_sec", "_secs", "_seconds")
ELAPSED_NAMES = ("wall_time", "elapsed", "time")  # preferred first, in this order
ELAPSED_WORDS = ("train_time", "training_time", "total_time", "walltime", "runtime")
PER_STEP_NAMES = ("dt", "step_time", "iter_time", "time_per_step", "time_per_iter", "batch_time")
COUNTERS = ("step", "iter")  # a duration only with a unit (step_ms); bare, they count steps
AVERAGE_WORDS = ("avg", "mean", "average")
# what the plot says it needs: the names, in the user's words
TIME_SOURCES = (
    "an elapsed time (wall_time, elapsed, time, train_time_ms)",
    "per-step durations (dt_ms, step_ms)",
    "a running average (step_avg_ms)",
)


class TimeKind(StrEnum):
    """How a time column is read, in order of preference."""

    ELAPSED = "elapsed time"
    PER_STEP = "per-step durations"
    AVERAGE = "a running average"


@dataclass(frozen=True)
class Shape:
    """What a stored curve keeps of a column: its count, its last logged value (NaN or inf
    as logged) and its lowest and highest finite values."""

    n_points: int
    last_value: float | None
    min_value: float | None
    max_value: float | None

    @classmethod
    def of(cls, values: np.ndarray) -> Shape:
        finite = values[np.isfinite(values)]
        last = float(values[-1]) if values.size else None
        if not finite.size:
            return cls(int(values.size), last, None, None)
        return cls(int(values.size), last, float(finite.min()), float(finite.max()))

    def grows(self) -> bool | None:
        """Whether the column runs up as an elapsed time does (None: too few points)."""
        last, low, top = self.last_value, self.min_value, self.max_value
        if self.n_points < 3 or last is None or low is None or top is None:
            return None
        return bool(np.isfinite(last) and last >= 0.99 * top and last - low >= 0.25 * last > 0)


@dataclass(frozen=True)
class TimeColumn:
    """A column read as time: ``by_shape`` when its shape, not its name, says how."""

    metric: str
    kind: TimeKind
    by_shape: bool = False

    @property
    def per_second(self) -> float:
        """How many of its units make a second."""
        return 1000.0 if self.metric.lower().endswith(MS_SUFFIX) else 1.0


def _base(metric: str) -> str:
    name = metric.lower()
    for suffix in (MS_SUFFIX, *SECOND_SUFFIXES):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name.removesuffix(suffix)
    return name


@lru_cache(maxsize=4096)  # a page asks for every run's every column: a few names
def named_kind(metric: str) -> TimeKind | None:
    """How ``metric``'s name says it holds time (None: no time by its name)."""
    base, words = _base(metric), set(_base(metric).split("_"))
    timed = metric.lower() != base or words & {"time", "dt", "step", "iter", "elapsed"}
    if timed and words & set(AVERAGE_WORDS):
        return TimeKind.AVERAGE
    if base in PER_STEP_NAMES or (base in COUNTERS and metric.lower() != base):
        return TimeKind.PER_STEP
    if base in ELAPSED_NAMES or base in ELAPSED_WORDS or base.startswith("elapsed"):
        return TimeKind.ELAPSED
    return None


def is_time_column(metric: str) -> bool:
    """Whether ``metric`` may hold time: by its name, or a ``*_ms`` column of any name."""
    return named_kind(metric) is not None or metric.lower().endswith(MS_SUFFIX)


def read_as(metric: str, shape: Shape) -> TimeColumn | None:
    """How a column is read as time, by its name checked by its shape (None: not time)."""
    kind = named_kind(metric)
    grows = shape.grows()
    if kind is None:
        if not metric.lower().endswith(MS_SUFFIX):
            return None
        return TimeColumn(metric, TimeKind.ELAPSED if grows else TimeKind.PER_STEP, True)
    if kind is TimeKind.ELAPSED and grows is False:
        return TimeColumn(metric, TimeKind.PER_STEP, True)
    return TimeColumn(metric, kind)


def time_columns(shapes: Mapping[str, Shape]) -> list[TimeColumn]:
    """Every time column of a run's ``shapes`` (metric -> shape), the preferred first: by
    kind, then elapsed names in ``ELAPSED_NAMES`` order, then by name."""
    found = [c for m, s in shapes.items() if (c := read_as(m, s)) is not None]
    order = list(TimeKind)

    def rank(column: TimeColumn) -> tuple[int, int, str]:
        base = _base(column.metric)
        named = ELAPSED_NAMES.index(base) if base in ELAPSED_NAMES else len(ELAPSED_NAMES)
        return order.index(column.kind), named, column.metric

    return sorted(found, key=rank)


def time_source(shapes: Mapping[str, Shape]) -> TimeColumn | None:
    """The column a run's wall time is read from; None without one."""
    columns = time_columns(shapes)
    return columns[0] if columns else None


def source_line(shapes: Mapping[str, Shape]) -> str | None:
    """One line saying which column gives the wall time and why, where the names alone do
    not make it plain: several time columns, a column read by its shape, or an average."""
    columns = time_columns(shapes)
    if not columns:
        return None
    used, others = columns[0], columns[1:]
    if not others and not used.by_shape and used.kind is not TimeKind.AVERAGE:
        return None
    how = {
        TimeKind.ELAPSED: "read as logged",
        TimeKind.PER_STEP: "summed",
        TimeKind.AVERAGE: "times the steps done",
    }[used.kind]
    line = f"wall time from {used.metric} ({used.kind}, {how})"
    if used.by_shape:
        line += ": its shape says so, " + (
            "it grows" if used.kind is TimeKind.ELAPSED else "it does not grow"
        )
    if others:
        line += "; not read: " + ", ".join(f"{c.metric} ({c.kind})" for c in others)
    return line


def backward_jumps(values: np.ndarray) -> np.ndarray:
    """Indices (into ``values``) of the finite values lower than the finite value before."""
    finite = np.flatnonzero(np.isfinite(values))
    return finite[1:][np.diff(values[finite]) < 0]


def continued(values: np.ndarray) -> np.ndarray:
    """An elapsed time with every backward jump (a timer reset) continued from the time
    reached before it; non-finite values stay as they are."""
    out = values.astype(np.float64, copy=True)
    finite = np.flatnonzero(np.isfinite(values))
    raw = out[finite]
    kept, offset = raw.copy(), 0.0
    for jump in np.flatnonzero(np.diff(raw) < 0) + 1:  # a few, never one a line
        offset += raw[jump - 1]  # the time reached, before this reset's own count
        kept[jump:] = raw[jump:] + offset
    out[finite] = kept
    return out


def in_seconds(column: TimeColumn, values: np.ndarray) -> np.ndarray:
    """A logged elapsed time in seconds, run forwards (NaN where it is not finite)."""
    return continued(np.where(np.isfinite(values), values, np.nan)) / column.per_second


def average_seconds(column: TimeColumn, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The elapsed seconds a running average of the step time gives: times the steps done,
    which the logged step counts (at least one)."""
    averages = np.where(np.isfinite(values), values, np.nan)
    return averages * np.maximum(steps, 1) / column.per_second
