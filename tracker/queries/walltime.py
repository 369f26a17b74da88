"""Wall time as the plot's x: the seconds since a run started, at each step of a curve, where
the run's metrics give it.

The rule, per run (``tracker.elapsed``): its time column read by kind. An elapsed time it logs
itself is read as logged, run forwards over a timer reset; per-step durations (``dt_ms``,
``step_ms``) are summed up over the stored (settled) steps: each logged duration for its own
step, and the steps between two logged ones (a run logging every 10th step is not ten times
fast) at the lower of the two, since a logged step may hold what the steps around it do not (a
compile, an evaluation: nanoGPT logs the duration of every 10th iteration, the evaluation's in
it); the time at a step is when that step ended, the first step included. A non-finite
duration counts as none, its neighbours' filling the steps around it; a running
average (``step_avg_ms``) is multiplied by the steps done. At a curve's steps between two of
the source's steps the time is interpolated linearly; before its first or after its last step
there is none (NaN, not drawn). A run with none of them has no wall time.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tracker.elapsed import (
    TIME_SOURCES,
    TimeColumn,
    TimeKind,
    average_seconds,
    continued,
    in_seconds,
    time_source,
)

__all__ = ["TIME_SOURCES", "TimeCursor", "elapsed_seconds", "time_source", "times_at"]


def elapsed_seconds(source: TimeColumn, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Seconds since the start at each of the source curve's ``steps`` (NaN where a logged
    elapsed time or average is not finite)."""
    if source.kind is TimeKind.ELAPSED:
        return in_seconds(source, values)
    if source.kind is TimeKind.AVERAGE:
        return average_seconds(source, steps, values)
    if steps.size == 0:
        return np.empty(0, np.float64)
    spent = step_durations(steps, values, int(steps[0]) - 1, np.nan)
    return np.cumsum(spent) / source.per_second


def step_durations(
    steps: np.ndarray, values: np.ndarray, step_before: int, value_before: float
) -> np.ndarray:
    """The time each logged point stands for: its own duration, and the unlogged steps since
    the point before (``step_before``, ``value_before``) at the lower of the two durations."""
    own = np.where(np.isfinite(values), values, 0.0)
    between = np.diff(steps, prepend=step_before) - 1
    fill = np.fmin(np.concatenate([[value_before], values[:-1]]), values)  # NaN: the other's
    return own + between * np.where(np.isfinite(fill), fill, 0.0)


def times_at(source_steps: np.ndarray, seconds: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The wall time at ``steps``, interpolated between the source's finite points; NaN
    outside them."""
    known = np.isfinite(seconds)
    if not known.any():
        return np.full(steps.size, np.nan)
    return np.interp(steps, source_steps[known], seconds[known], left=np.nan, right=np.nan)


class TimeCursor:
    """``times_at`` a curve's steps, asked for in step order, from the source curve's chunks
    read one at a time as the steps reach them: the seconds run on from chunk to chunk (the
    sum of durations, a timer reset continued), and only the source's points from the last
    one before the steps asked onwards are kept."""

    def __init__(self, source: TimeColumn, chunks: Iterator[tuple[np.ndarray, np.ndarray]]) -> None:
        self.source = source
        self.chunks = chunks
        self.steps = np.empty(0, np.int64)  # the source's points with a known time, kept
        self.seconds = np.empty(0, np.float64)
        self.total = 0.0  # durations summed so far, as logged
        self.last_step: int | None = None
        self.last_duration = np.nan  # the duration logged last, as logged
        self.offset = 0.0  # what the timer resets so far add
        self.last_raw: float | None = None

    def at(self, steps: np.ndarray) -> np.ndarray:
        if steps.size == 0:
            return np.empty(0, np.float64)
        while not self.steps.size or self.steps[-1] < steps[-1]:
            chunk = next(self.chunks, None)
            if chunk is None:
                break
            seconds = self._seconds(*chunk)
            known = np.isfinite(seconds)
            self.steps = np.concatenate([self.steps, chunk[0][known]])
            self.seconds = np.concatenate([self.seconds, seconds[known]])
            self._keep_from(int(steps[0]))
        if not self.steps.size:
            return np.full(steps.size, np.nan)
        times = np.interp(steps, self.steps, self.seconds, left=np.nan, right=np.nan)
        self._keep_from(int(steps[-1]))
        return times

    def _keep_from(self, step: int) -> None:
        """Drop the points before the last one at or before ``step``: later steps asked for
        lie after it."""
        keep = max(0, int(np.searchsorted(self.steps, step, side="right")) - 1)
        self.steps, self.seconds = self.steps[keep:], self.seconds[keep:]

    def _seconds(self, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``elapsed_seconds`` of one chunk, run on from the chunks before."""
        if self.source.kind is TimeKind.AVERAGE:
            return average_seconds(self.source, steps, values)
        if self.source.kind is TimeKind.PER_STEP:
            before = int(steps[0]) - 1 if self.last_step is None else self.last_step
            durations = step_durations(steps, values, before, self.last_duration)
            summed = np.cumsum(np.concatenate([[self.total], durations]))[1:]
            self.total, self.last_step = float(summed[-1]), int(steps[-1])
            self.last_duration = float(values[-1])
            return summed / self.source.per_second
        raw = np.where(np.isfinite(values), values, np.nan)
        if self.last_raw is not None:
            raw = np.concatenate([[self.last_raw], raw])
        run_on = continued(raw) + self.offset
        finite = np.flatnonzero(np.isfinite(raw))
        if finite.size:
            last = finite[-1]
            self.offset, self.last_raw = float(run_on[last] - raw[last]), float(raw[last])
        if raw.size > values.size:
            run_on = run_on[1:]
        return run_on / self.source.per_second
