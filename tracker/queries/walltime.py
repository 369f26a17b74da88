"""Wall time as the plot's x: the seconds since a run started, at each step of a curve, where
the run's metrics give it.

The rule, per run: a metric of elapsed seconds it logs itself (``wall_time``, ``elapsed`` or
``time``, the first of them it has) is read as logged; else ``step_ms`` (each step's duration
in milliseconds, as the study's CSVs log it) is summed up over the stored (settled) steps and
turned into seconds, each logged duration standing for the steps since the previous logged one
(so a run logging every 10th step is not ten times fast), the first for its own step only: the
time at a step is when that step ended, the first (often slow, compiling) step included. A
non-finite duration counts as none. At a curve's steps between two of the source's steps the
time is interpolated linearly; before its first or after its last step there is none (NaN,
not drawn). A run with neither has no wall time.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

ELAPSED_METRICS = ("wall_time", "elapsed", "time")  # seconds since the run started
STEP_MS = "step_ms"  # one step's duration, in milliseconds
TIME_SOURCES = (*ELAPSED_METRICS, STEP_MS)  # in order of preference


def time_source(metrics: Collection[str]) -> str | None:
    """The metric a run's wall time is read from, of the run's ``metrics``; None without."""
    return next((metric for metric in TIME_SOURCES if metric in metrics), None)


def elapsed_seconds(source: str, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Seconds since the start at each of the source curve's ``steps`` (NaN where a logged
    elapsed time is not finite)."""
    if source != STEP_MS:
        return np.where(np.isfinite(values), values, np.nan).astype(np.float64)
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
