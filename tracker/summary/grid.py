"""One arm's smoothed loss in one job on a grid of steps: what the figures across jobs draw."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracker.summary.arrays import packed, unpacked

GRID_POINTS = 160  # steps per job's curve kept for the figures across jobs


@dataclass(frozen=True)
class GridCurve:
    """One arm's loss in one job, EMA-smoothed over all its points, sampled on a grid.

    ``values[i]`` is the EMA (``smooth``) at step ``first + i * (last - first) /
    (len(values) - 1)`` (linear interpolation between the steps around it); NaN between the
    steps around a non-finite loss (a gap: the smoothing resumes after it).
    """

    first: int
    last: int
    values: np.ndarray  # float32
    points: int  # steps in the full series
    first_bad: int | None  # first step whose raw loss is not finite

    @property
    def steps(self) -> np.ndarray:
        return np.linspace(self.first, self.last, self.values.size)

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "last": self.last,
            "values": packed(self.values, "<f4"),
            "points": self.points,
            "first_bad": self.first_bad,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> GridCurve:
        values = unpacked(doc["values"], "<f4")
        return cls(doc["first"], doc["last"], values, doc["points"], doc["first_bad"])


def grid_curve(steps: np.ndarray, smoothed: np.ndarray, raw: np.ndarray) -> GridCurve:
    """An arm's ``smooth`` (``smoothed``, over every step) sampled at ``GRID_POINTS`` steps."""
    bad = np.flatnonzero(~np.isfinite(raw))
    first_bad = int(steps[bad[0]]) if bad.size else None
    if steps.size == 0:
        return GridCurve(0, 0, np.empty(0, np.float32), 0, None)
    first, last = int(steps[0]), int(steps[-1])
    grid = np.linspace(first, last, min(GRID_POINTS, steps.size))
    # np.interp is NaN on the intervals beside a NaN point only: the gap, and no further
    values = np.interp(grid, steps.astype(np.float64), smoothed.astype(np.float64))
    return GridCurve(first, last, values.astype(np.float32), int(steps.size), first_bad)
