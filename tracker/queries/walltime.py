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

import numpy as np

from tracker.elapsed import STEP_MS, TIME_SOURCES, in_seconds, time_source

__all__ = ["TIME_SOURCES", "elapsed_seconds", "time_source", "times_at"]


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
