"""The numbers the trajectories figure draws: EMA-smoothed arms, and the raw divergence arm
beside them, each line downsampled (``tracker.figures.trajectories`` draws them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tracker.analysis.smoothing import ema_smooths, smooth
from tracker.summary.arms import split_arm
from tracker.summary.arrays import late_range, packed, unpacked
from tracker.summary.downsample import DEFAULT_MAX_POINTS, downsample

if TYPE_CHECKING:
    import polars as pl

    from tracker.analysis.expectations import Expectations


def _drawable(values: np.ndarray) -> np.ndarray:
    """Non-finite losses become NaN: plotly draws a gap there (and cannot draw inf)."""
    return np.where(np.isfinite(values), values, np.nan)


def arm_order(arms: list[str], exp: Expectations) -> list[str]:
    """The expectations' arms first (baseline, candidate, seed twin, divergent), then by name."""
    tr = exp.training
    known = [tr.baseline, tr.candidate, tr.seed_twin, tr.divergent]  # the study's roles
    first = [a for a in dict.fromkeys(known) if a in arms]
    return first + sorted(a for a in arms if a not in first)


@dataclass(frozen=True)
class Line:
    """One drawn curve: an arm's EMA (left panel) or raw loss (right panel), downsampled."""

    arm: str
    right: bool  # the right panel (raw loss, log axis)
    raw_baseline: bool  # the baseline's raw loss beside the divergent arm
    x: np.ndarray  # steps, int64
    y: np.ndarray  # float64, NaN where the loss is not finite
    as_logged: bool = False  # left: logged so sparsely that an EMA would only redraw it


@dataclass(frozen=True)
class TrajectoryDrawing:
    """The numbers the trajectories figure draws: each line already downsampled, the steps
    where a right-panel arm stops being finite, how many points were drawn of how many and
    the left panel's zoom. It takes every point of every curve to make, so it is kept per
    job (tracker.summary.model); titles, styles and notes are added by
    ``trajectories_figure``."""

    lines: list[Line]
    non_finite_from: list[int]  # per right-panel arm that has one, its first non-finite step
    drawn: int
    total: int
    zoom: tuple[float, float] | None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready, the arrays as base64 of their little-endian bytes (exact, and parsed
        many times faster than lists of numbers)."""
        return {
            "lines": [
                {**vars(line), "x": packed(line.x, "<i8"), "y": packed(line.y, "<f8")}
                for line in self.lines
            ],
            "non_finite_from": self.non_finite_from,
            "drawn": self.drawn,
            "total": self.total,
            "zoom": list(self.zoom) if self.zoom else None,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TrajectoryDrawing:
        lines = [
            Line(**{**line, "x": unpacked(line["x"], "<i8"), "y": unpacked(line["y"], "<f8")})
            for line in doc["lines"]
        ]
        zoom = doc["zoom"]
        return cls(lines, doc["non_finite_from"], doc["drawn"], doc["total"], zoom and tuple(zoom))


def trajectory_drawing(
    curves: Mapping[str, pl.DataFrame],
    exp: Expectations,
    max_points: int = DEFAULT_MAX_POINTS,
    smoothed: Mapping[str, np.ndarray] | None = None,
) -> TrajectoryDrawing:
    """What the study's two-panel ``gpt_trajectories`` figure draws.

    Left: every arm's loss smoothed (``smooth``, ``exp.training.ema_alpha``: per step, gaps
    where the loss is not finite) over its FULL series.
    Right: the raw loss of the divergence arm(s) (the variant of ``exp.training.divergent``)
    and of the baseline arm, on a log axis, with the step where the loss stops being finite.
    Each line is then downsampled for drawing only, to at most ``max_points`` points
    (min/max preserving). One panel when there is no divergence arm. The left panel's y axis
    shows the loss from 10% of the steps on, as the index's figures (the first drop would
    flatten the curves into one line). ``smoothed``: arm -> its ``smooth``, when the caller
    has it.
    """
    points = {
        arm: (frame.get_column("step").to_numpy(), frame.get_column("value").to_numpy())
        for arm, frame in curves.items()
    }
    return drawing_of_points(points, exp, max_points, smoothed)


def drawing_of_points(
    points: Mapping[str, tuple[np.ndarray, np.ndarray]],
    exp: Expectations,
    max_points: int = DEFAULT_MAX_POINTS,
    smoothed: Mapping[str, np.ndarray] | None = None,
) -> TrajectoryDrawing:
    """``trajectory_drawing`` of each arm's steps and values (no frames to make)."""
    tr = exp.training
    present = arm_order([arm for arm, (steps, _) in points.items() if len(steps)], exp)
    divergent_variant = split_arm(tr.divergent)[0]
    right = [a for a in present if split_arm(a)[0] == divergent_variant]
    left = [a for a in present if a not in right]
    lines: list[Line] = []
    non_finite_from: list[int] = []
    total = 0

    def add(arm: str, values: np.ndarray, *, on_right: bool, raw: bool = False) -> None:
        nonlocal total
        steps = points[arm][0]
        x, y = downsample(steps, _drawable(values), max_points)
        total += len(steps)
        baseline = raw and on_right
        lines.append(Line(arm, on_right, baseline, x, y, as_logged=raw and not on_right))

    smoothed = smoothed or {}
    for arm in left:
        if not ema_smooths(points[arm][0], tr.ema_alpha):
            add(arm, points[arm][1], on_right=False, raw=True)
            continue
        series = smoothed.get(arm)
        if series is None:
            series = smooth(*points[arm], tr.ema_alpha)
        add(arm, series, on_right=False)
    for arm in right:
        steps, values = points[arm]
        add(arm, values, on_right=True)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            non_finite_from.append(int(steps[int(bad[0])]))
    baseline = points.get(tr.baseline)
    if right and baseline is not None and len(baseline[0]):
        add(tr.baseline, baseline[1], on_right=True, raw=True)
    drawn = sum(len(line.x) for line in lines)
    zoom = late_range([(line.x, line.y) for line in lines if not line.right])
    return TrajectoryDrawing(lines, non_finite_from, drawn, total, zoom)
