"""A job's summary, verdicts and numbers, built from its full data (pure: no database)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracker.analysis.job import analyze_job
from tracker.analysis.smoothing import ema_smooths, smooth
from tracker.summary.grid import grid_curve
from tracker.summary.model import DIVERGED_AT, EMA_DELTA, SEED_NOISE, Derived, Summary
from tracker.summary.trajectories import trajectory_drawing

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations
    from tracker.domain import JobData


def summarize(data: JobData, exp: Expectations) -> Summary:
    """A job's summary from its full data (each arm's loss smoothed once, by ``smooth``: the
    figures and the tracking check; the script's numbers keep its ``ema``)."""
    smoothed = {
        arm: smooth(
            frame.get_column("step").to_numpy(),
            frame.get_column("value").to_numpy(),
            exp.training.ema_alpha,
        )
        for arm, frame in data.curves.items()
    }
    curves = {}
    for arm, frame in data.curves.items():
        steps, raw = frame.get_column("step").to_numpy(), frame.get_column("value").to_numpy()
        # a curve logged far apart is drawn as logged (an EMA would only redraw it)
        drawn = smoothed[arm] if ema_smooths(steps, exp.training.ema_alpha) else raw
        curves[arm] = grid_curve(steps, drawn, raw)
    drawing = trajectory_drawing(data.curves, exp, smoothed=smoothed)
    return Summary(
        analyze_job(data, exp, smoothed),
        lambda: drawing,
        curves,
        sum(frame.height for frame in data.curves.values()),
    )


def derive(summary: Summary, exp: Expectations) -> Derived:
    """A job's verdicts and derived numbers, from its summary."""
    tracking = summary.analysis.tracking
    divergent = summary.curves.get(exp.training.divergent)
    first_bad = divergent.first_bad if divergent is not None else None
    numbers = {
        EMA_DELTA: tracking.get(EMA_DELTA),
        SEED_NOISE: tracking.get(SEED_NOISE),
        DIVERGED_AT: None if first_bad is None else float(first_bad),
    }
    return Derived(summary.analysis.verdicts, numbers)
