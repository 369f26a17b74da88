"""Elapsed-time columns of a training log: which metric holds a run's wall time, and that
time made to run forwards.

A run logs its elapsed seconds (``wall_time``, ``elapsed`` or ``time``), its elapsed
milliseconds (a name ending in ``_ms`` such as ``train_time_ms``; ``step_ms`` is one step's
duration, not elapsed time) or each step's duration (``step_ms``). A logged elapsed time that
goes backwards is a timer reset (modded-nanogpt resets its timer after the warm-up steps): the
time after it is continued from where it was, so that no curve is drawn backwards, and the
ingest notes it (``tracker.jobdir.series``).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

ELAPSED_METRICS = ("wall_time", "elapsed", "time")  # seconds since the run started
STEP_MS = "step_ms"  # one step's duration, in milliseconds
MS_SUFFIX = "_ms"  # elapsed milliseconds: train_time_ms
TIME_SOURCES = (*ELAPSED_METRICS, f"*{MS_SUFFIX}", STEP_MS)  # in order of preference


def elapsed_metrics(metrics: Collection[str]) -> list[str]:
    """The metrics of ``metrics`` that hold an elapsed time, in order of preference."""
    in_ms = sorted(m for m in metrics if m.endswith(MS_SUFFIX) and m != STEP_MS)
    return [m for m in ELAPSED_METRICS if m in metrics] + in_ms


def time_source(metrics: Collection[str]) -> str | None:
    """The metric a run's wall time is read from, of the run's ``metrics``; None without."""
    elapsed = elapsed_metrics(metrics)
    return elapsed[0] if elapsed else (STEP_MS if STEP_MS in metrics else None)


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


def in_seconds(metric: str, values: np.ndarray) -> np.ndarray:
    """A logged elapsed time in seconds, run forwards (NaN where it is not finite)."""
    seconds = continued(np.where(np.isfinite(values), values, np.nan))
    return seconds / 1000.0 if metric.endswith(MS_SUFFIX) else seconds
