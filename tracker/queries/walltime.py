"""Wall time as the plot's x: the seconds since a run started, at each step of a curve, where
the run's metrics give it.

The rule, per run: a metric of elapsed time it logs itself (``wall_time``, ``elapsed`` or
``time`` in seconds, the first of them it has, else a ``*_ms`` one such as ``train_time_ms``
in milliseconds) is read as logged, run forwards over a timer reset (``tracker.elapsed``);
else ``step_ms`` (each step's duration
in milliseconds, as the study's CSVs log it) is summed up over the stored (settled) steps and
turned into seconds, each logged duration standing for the steps since the previous logged one
(so a run logging every 10th step is not ten times fast), the first for its own step only: the
time at a step is when that step ended, the first (often slow, compiling) step included. A
non-finite duration counts as none. At a curve's steps between two of the source's steps the
time is interpolated linearly; before its first or after its last step there is none (NaN,
not drawn). A run with neither has no wall time.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tracker.elapsed import MS_SUFFIX, STEP_MS, TIME_SOURCES, continued, in_seconds, time_source

__all__ = ["TIME_SOURCES", "TimeCursor", "elapsed_seconds", "time_source", "times_at"]


def elapsed_seconds(source: str, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Seconds since the start at each of the source curve's ``steps`` (NaN where a logged
    elapsed time is not finite)."""
    if source != STEP_MS:
        return in_seconds(source, values)
    if steps.size == 0:
        return np.empty(0, np.float64)
    covered = np.diff(steps, prepend=steps[0] - 1)  # steps each logged duration stands for
    durations = np.where(np.isfinite(values), values, 0.0)
    return np.cumsum(durations * covered) / 1000.0


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
    sum of ``step_ms``, a timer reset continued), and only the source's points from the last
    one before the steps asked onwards are kept."""

    def __init__(self, source: str, chunks: Iterator[tuple[np.ndarray, np.ndarray]]) -> None:
        self.source = source
        self.chunks = chunks
        self.steps = np.empty(0, np.int64)  # the source's points with a known time, kept
        self.seconds = np.empty(0, np.float64)
        self.total_ms = 0.0  # step_ms summed so far
        self.last_step: int | None = None
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
        if self.source == STEP_MS:
            before = steps[0] - 1 if self.last_step is None else self.last_step
            durations = np.where(np.isfinite(values), values, 0.0) * np.diff(steps, prepend=before)
            summed = np.cumsum(np.concatenate([[self.total_ms], durations]))[1:]
            self.total_ms, self.last_step = float(summed[-1]), int(steps[-1])
            return summed / 1000.0
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
        return run_on / 1000.0 if self.source.endswith(MS_SUFFIX) else run_on
