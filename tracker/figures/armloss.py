"""Training loss across jobs, one figure per arm, readable from two jobs to thousands.

Training loss: for each arm, the median over jobs and the band between the 25th and 75th
percentiles, computed on a common step grid from each job's EMA (smoothed over its full
series, then sampled at ``GRID_POINTS`` steps, see ``grid_curve``). On top, the latest
``LATEST`` jobs and the outliers (final smoothed loss outside the quartiles +- 1.5
interquartile ranges, the most extreme ``MAX_OUTLIERS``), each a line named by its job. With
at most ``ALL_LINES_UP_TO`` jobs every job is drawn as its own line instead: a band over
three jobs would pretend to be a distribution.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tracker.analysis.smoothing import KEPT_AT_LEAST
from tracker.figures.style import (
    Figure,
    Palette,
    arm_style,
    axis,
    empty_figure,
    figure,
    footnote_lines,
    layout,
    plot_text,
    scatter,
    short_list,
    wrap_lines,
)
from tracker.summary.arrays import late_range
from tracker.summary.grid import GRID_POINTS, GridCurve

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

ARM_HEIGHT = 440
NOTE_WIDTH = 76  # characters of a footnote line in a half-width figure
ALL_LINES_UP_TO = 8
LATEST = 3
MAX_OUTLIERS = 5
LATEST_COLORS = ("#3b0f70", "#8c2981", "#de4968")  # newest first
OUTLIER_COLOR = "#b3591f"
BAND_COLOR = "rgba(42, 120, 214, 0.18)"
MEDIAN_COLOR = "#2a78d6"
# several jobs: Viridis from light green (oldest) to dark purple (newest)
VIRIDIS = ("#b5de2b", "#6ece58", "#35b779", "#1f9e89", "#26828e", "#31688e", "#3e4989", "#482878")


def _on_grid(curve: GridCurve, grid: np.ndarray) -> np.ndarray:
    """``curve`` interpolated at ``grid`` steps; NaN outside its own steps."""
    if curve.values.size == 0:
        return np.full(grid.size, np.nan)
    if curve.values.size == 1:
        return np.where(grid == curve.first, float(curve.values[0]), np.nan)
    if curve.values.size == grid.size and curve.first == grid[0] and curve.last == grid[-1]:
        return curve.values.astype(np.float64)  # already on this grid (most jobs): as interp
    values = np.interp(grid, curve.steps, curve.values.astype(np.float64))
    values[(grid < curve.first) | (grid > curve.last)] = np.nan
    return values


def _as_logged(curve: GridCurve, alpha: float) -> bool:
    """A curve logged so far apart that its EMA would only redraw it (``ema_smooths``): its
    grid holds the values as logged."""
    gap = (curve.last - curve.first) / max(curve.points - 1, 1)
    return curve.points > 1 and (1 - alpha) ** gap < KEPT_AT_LEAST


def _last_finite(table: np.ndarray) -> np.ndarray:
    """Each row's last finite value (NaN: none)."""
    finite = np.isfinite(table)
    last = table.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)
    return np.where(finite.any(axis=1), table[np.arange(table.shape[0]), last], np.nan)


def outliers(finals: Mapping[str, float], limit: int = MAX_OUTLIERS) -> list[str]:
    """Jobs whose final smoothed loss lies beyond the quartiles +- 1.5 interquartile ranges
    (Tukey's fences), the farthest first, at most ``limit``."""
    names = [name for name, value in finals.items() if np.isfinite(value)]
    if len(names) < 4:
        return []
    values = np.array([finals[name] for name in names])
    q1, q3 = np.percentile(values, [25, 75])
    reach = 1.5 * (q3 - q1)
    distance = np.maximum(q1 - reach - values, values - q3 - reach)
    far = [(float(d), name) for d, name in zip(distance, names, strict=True) if d > 0]
    return [name for _, name in sorted(far, key=lambda item: -item[0])[:limit]]


@dataclass
class _ArmDrawing:
    """One arm's curves on a common step grid, and the traces drawn from them so far (with
    what each line draws, for the zoom)."""

    curves: Mapping[str, GridCurve]
    names: list[str]
    grid: np.ndarray
    table: np.ndarray  # one row per job, one column per grid step
    steps: np.ndarray
    traces: list[dict[str, Any]] = field(default_factory=list)
    drawn: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    mode: str = "lines"  # lines+markers: every curve as logged, far apart

    @classmethod
    def on_common_grid(cls, curves: Mapping[str, GridCurve]) -> _ArmDrawing:
        names = list(curves)
        first = min(c.first for c in curves.values())
        last = max(c.last for c in curves.values())
        grid = np.linspace(first, last, GRID_POINTS) if last > first else np.array([float(first)])
        table = np.vstack([_on_grid(curves[name], grid) for name in names])
        return cls(curves, names, grid, table, grid.round().astype(np.int64))

    def line(self, name: str, color: str, width: float, dash: str = "solid", tag: str = "") -> None:
        """Draw one job's curve, named by the job (and ``tag``)."""
        curve = self.curves[name]
        values = self.table[self.names.index(name)]
        keep = np.isfinite(values) | ((self.grid >= curve.first) & (self.grid <= curve.last))
        x, y = self.steps[keep], values[keep].astype(np.float32)
        self.drawn.append((x, y))
        shown = plot_text(name)
        self.traces.append(
            scatter(
                x=x,
                y=y,
                mode=self.mode,
                marker=dict(size=5),
                name=f"{shown}{tag}",
                line=dict(color=color, width=width, dash=dash),
                hovertemplate=f"{shown}{tag}, step %{{x:,}}: %{{y:.4f}}<extra></extra>",
            )
        )


def arm_across_jobs(
    arm: str, curves: Mapping[str, GridCurve], exp: Expectations, *, latest: int = LATEST
) -> Figure:
    """One arm's EMA-smoothed training loss across jobs (``curves``: job -> its curve, in job
    order): median and interquartile band with the latest jobs and the outliers on top, or
    one line per job when there are few (see the module's docstring). A log y axis when the
    curves span more than a decade (a divergence), else the loss from 10% of the steps on."""
    label, _color, _dash = arm_style(arm, Palette())
    title = f"{plot_text(arm)}: {plot_text(label)}, training loss across jobs"
    if not curves:
        return empty_figure(title, ARM_HEIGHT, f"no curve of {plot_text(arm)}")
    drawing = _ArmDrawing.on_common_grid(curves)
    alpha = exp.training.ema_alpha
    sparse = all(_as_logged(curve, alpha) for curve in curves.values())
    if sparse:
        drawing.mode = "lines+markers"
    if len(drawing.names) <= ALL_LINES_UP_TO:
        notes = [_each_job(drawing)]
    else:
        notes = [_band_with_latest_and_outliers(drawing, latest)]
    yaxis = _loss_axis(drawing, notes, "loss" if sparse else "train loss, EMA")
    ema = f"EMA (alpha={alpha:g})"
    if sparse:
        notes.insert(
            0, f"each job's loss as logged: an {ema} at its step gaps would only redraw it"
        )
    else:
        notes.insert(0, f"{ema} over every step of each job, drawn at {drawing.grid.size} steps")
    bad = [f"{plot_text(n)} from step {c.first_bad:,}" for n, c in curves.items() if c.first_bad]
    if bad:
        notes.append(f"loss not finite (gap in the EMA) in {len(bad)}: {short_list(bad, 3)}")
    notes = wrap_lines(notes, NOTE_WIDTH)
    settings = layout(
        title,
        ARM_HEIGHT,
        margin=dict(l=60, r=20, t=70, b=64 + 14 * len(notes)),
        legend=dict(orientation="h", y=1.0, x=0, yanchor="bottom", font=dict(size=11)),
        hovermode="closest",
        xaxis=axis(title=dict(text="step")),
        yaxis=yaxis,
        annotations=[footnote_lines(notes, -52)],
    )
    settings["title"].update(font=dict(size=14))
    return figure(data=drawing.traces, layout=settings)


def _each_job(drawing: _ArmDrawing) -> str:
    """Few jobs: one line each, light (oldest) to dark (newest); returns the footnote."""
    names = drawing.names
    for name, color in zip(names, _ramp(len(names)), strict=True):
        drawing.line(name, color, 1.8)
    return f"one line per job ({len(names)}), darker is newer"


def _band_with_latest_and_outliers(drawing: _ArmDrawing, latest: int) -> str:
    """Many jobs: the median and interquartile band, then the outliers and the ``latest``
    jobs as lines on top; returns the footnote."""
    names = drawing.names
    _quartile_band(drawing)
    finals = dict(zip(names, _last_finite(drawing.table).tolist(), strict=True))
    newest = names[-latest:][::-1]
    odd = [name for name in outliers(finals) if name not in newest]
    for name in odd:
        drawing.line(name, OUTLIER_COLOR, 1.2, "dot", " (outlier)")
    for name, color in zip(newest, LATEST_COLORS, strict=False):
        drawing.line(name, color, 1.8, tag=" (latest)" if name == names[-1] else "")
    return (
        f"band: 25th\u201375th percentile of {len(names)} jobs at each step; lines: the "
        f"{len(newest)} latest jobs and {len(odd)} outlier{'s' if len(odd) != 1 else ''} "
        "(final loss beyond the quartiles \u00b1 1.5 IQR)"
    )


def _column_percentiles(table: np.ndarray, q: list[float]) -> np.ndarray:
    """``np.nanpercentile(table, q, axis=0)``, the same numbers: the columns without a NaN at
    once (``nanpercentile`` takes a column at a time, a Python call each)."""
    found = np.empty((len(q), table.shape[1]))
    gaps = np.isnan(table).any(axis=0)
    found[:, ~gaps] = np.percentile(table[:, ~gaps], q, axis=0)
    if gaps.any():
        found[:, gaps] = np.nanpercentile(table[:, gaps], q, axis=0)
    return found


def _quartile_band(drawing: _ArmDrawing) -> None:
    """The 25th-75th percentile band and the median over jobs, at the grid steps that at
    least two jobs reach."""
    table, steps = drawing.table, drawing.steps
    with np.errstate(all="ignore"):
        counted = np.isfinite(table).sum(axis=0)
        ok = counted >= 2
        quartiles = np.full((3, drawing.grid.size), np.nan)
        if ok.any():
            quartiles[:, ok] = _column_percentiles(table[:, ok], [25, 50, 75])
    low, median, high = (q.astype(np.float32) for q in quartiles)

    def lines(values: np.ndarray, **style: Any) -> dict[str, Any]:
        return scatter(x=steps[ok], y=values[ok], mode="lines", **style)

    band = f"25th\u201375th percentile over {len(drawing.names)} jobs"
    hover = "median over jobs, step %{x:,}: %{y:.4f}<extra></extra>"
    drawing.traces += [
        lines(high, line=dict(width=0), hoverinfo="skip", showlegend=False),
        lines(
            low,
            fill="tonexty",
            fillcolor=BAND_COLOR,
            line=dict(width=0),
            name=band,
            hoverinfo="skip",
        ),
        lines(
            median,
            name="median over jobs",
            line=dict(color=MEDIAN_COLOR, width=2),
            hovertemplate=hover,
        ),
    ]
    drawing.drawn.append((steps[ok], median[ok]))


def _loss_axis(drawing: _ArmDrawing, notes: list[str], title: str) -> dict[str, Any]:
    """The y axis, titled ``title``: log when the curves span more than a decade, else zoomed
    on the loss from 10% of the steps on (said in ``notes``)."""
    values = drawing.table[np.isfinite(drawing.table)]
    yaxis = axis(title=dict(text=title))
    if values.size and values.min() > 0 and values.max() / values.min() > 10:
        # a divergence: only a log axis shows both it and the loss before it
        yaxis.update(type="log", dtick=1, title=dict(text=f"{title} (log scale)"))
    else:
        zoom = late_range(drawing.drawn)
        if zoom is not None:
            yaxis["range"] = list(zoom)
            notes.append("y axis: the loss from 10% of the steps on (double-click: all of it)")
    return yaxis


def _ramp(n: int) -> list[str]:
    """``n`` colours from light (oldest) to dark (newest)."""
    if n == 1:
        return [VIRIDIS[-1]]
    return [VIRIDIS[round(i * (len(VIRIDIS) - 1) / (n - 1))] for i in range(n)]
