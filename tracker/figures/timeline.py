"""Drawing per-job values on a job-time axis: each job at its time (``time`` metadata, else
ingest time) as milliseconds on a plotly date axis, with reference lines, and per-job marks
that give way to plain lines and bands when there are many jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from tracker.figures.style import axis, scatter

# Per-variant lines over job time mark each job (a marker, an error bar) up to this many
# jobs. Past it the marks merge into a line and a band anyway, and each is an SVG element
# for the browser to build: 9,000 of them at 1,000 jobs took most of the index's load time.
MARKS_UP_TO = 60
SPREAD_OPACITY = 0.2


@dataclass(frozen=True)
class Job:
    """A job on the time axis: its name and when it ran (what orders the jobs)."""

    name: str
    time: datetime


def job_times(jobs: Sequence[Job]) -> np.ndarray:
    """Each job's time in milliseconds since 1970 (what a plotly.js date axis takes): as a
    typed array, a third of the bytes of date strings."""
    return np.array([job.time.timestamp() * 1000 for job in jobs], dtype=np.float64)


def time_axis() -> dict[str, Any]:
    return axis(type="date", title=dict(text="job time (time metadata, else ingest time)"))


def reference_line(y: float, color: str, label: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A dotted line of ``color`` across the plot at ``y``, ``label`` just right of it."""
    shape = dict(
        type="line",
        xref="x domain",
        x0=0,
        x1=1,
        yref="y",
        y0=y,
        y1=y,
        line=dict(dash="dot", color=color, width=1.5),
        layer="below",
    )
    text = dict(
        text=label,
        xref="x domain",
        x=1,
        xanchor="left",
        xshift=4,
        yref="y",
        y=y,
        showarrow=False,
        font=dict(color=color, size=11),
    )
    return shape, text


def per_job_marks(points: int, color: str) -> dict[str, Any]:
    """A per-variant line's mode and markers: a marker per job up to ``MARKS_UP_TO`` jobs,
    a plain line past that (the markers would merge into it anyway)."""
    if points <= MARKS_UP_TO:
        return dict(mode="lines+markers", marker=dict(color=color, size=7))
    return dict(mode="lines")


def spread_band(
    x: np.ndarray, means: Sequence[float], spread: Sequence[float], color: str, name: str
) -> dict[str, Any]:
    """The band mean +- spread along a line of many jobs: one SVG path where error bars
    would be one per job. Drawn under the line, in its legend group, without hover (the
    line's hover gives each job's spread)."""
    mean, half = np.asarray(means, dtype=np.float64), np.asarray(spread, dtype=np.float64)
    return scatter(
        x=np.concatenate([x, x[::-1]]),
        y=np.concatenate([mean + half, (mean - half)[::-1]]),
        mode="lines",
        fill="toself",
        fillcolor=color,
        opacity=SPREAD_OPACITY,
        line=dict(width=0),
        legendgroup=name,
        showlegend=False,
        hoverinfo="skip",
    )
