"""A window of one curve: its points between two steps, read alone (only the chunks that hold
them) and min/max-downsampled beyond a number of points. ``/api/curve``, ``api.curve`` and
``tracker query curve --start/--end/--points`` all read windows through ``read_window``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from tracker.domain import MIN_WINDOW_POINTS
from tracker.errors import TooFewPoints, WindowReversed
from tracker.models import Curve
from tracker.store.curves import read_curve
from tracker.summary.downsample import minmax_indices


@dataclass(frozen=True)
class Window:
    """The points of a curve from ``start`` to ``end`` (both included; None for a curve
    without points): ``in_window`` of them, at most ``points`` kept."""

    start: int | None
    end: int | None
    in_window: int
    step: np.ndarray  # int64
    value: np.ndarray  # float64

    @property
    def raw(self) -> bool:
        """Every point of the window is kept."""
        return len(self.step) == self.in_window


def check_window(start: int | None, end: int | None, points: int | None) -> None:
    """Raise the error of a window no curve has: ``start`` after ``end``, too few points."""
    if start is not None and end is not None and start > end:
        raise WindowReversed(start=start, end=end)
    if points is not None and points < MIN_WINDOW_POINTS:
        raise TooFewPoints(least=MIN_WINDOW_POINTS, points=points)


def kept(value: np.ndarray, points: int | None) -> np.ndarray | slice:
    """The points a window keeps: all (a slice: indexing by it copies nothing), or beyond
    ``points`` the ``minmax_indices`` (each bucket's ends and extremes) topped up to
    ``points`` with others evenly spread: a bucket of a monotone curve gives only its two
    ends, and 11 steps asked for as 10 points are not 4."""
    if points is None or len(value) <= points:
        return slice(None)
    picked = minmax_indices(value, points)
    spare = points - len(picked)
    if spare <= 0:
        return picked
    others = np.ones(len(value), dtype=bool)
    others[picked] = False
    rest = np.flatnonzero(others)
    extra = rest[np.linspace(0, len(rest) - 1, spare).round().astype(np.int64)]
    return np.union1d(picked, extra)


def read_window(
    session: Session, curve: Curve, start: int | None, end: int | None, points: int | None
) -> Window:
    """``curve``'s points from ``start`` to ``end`` (default: its first and last step), read
    from the chunks that hold them alone, min/max-downsampled to at most ``points`` (None:
    every point)."""
    check_window(start, end, points)
    if curve.first_step is None or curve.last_step is None:
        empty = np.empty(0, np.int64)
        return Window(None, None, 0, empty, empty.astype(np.float64))
    low = curve.first_step if start is None else start
    high = curve.last_step if end is None else end
    whole = start is None and end is None  # every chunk: no step bounds to look up or cut at
    step, value = read_curve(session, curve.id, None if whole else (low, high))
    keep = kept(value, points)
    return Window(low, high, len(step), step[keep], value[keep])
