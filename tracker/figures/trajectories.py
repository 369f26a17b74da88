"""Training loss trajectories: EMA-smoothed arms, and the raw divergence arm beside them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tracker.analysis.smoothing import ema
from tracker.figures.downsample import DEFAULT_MAX_POINTS, downsample
from tracker.figures.style import (
    ARM_STYLES,
    ZOOM_AFTER,
    Figure,
    Palette,
    arm_style,
    axis,
    columns,
    empty_figure,
    figure,
    footnote,
    late_range,
    layout,
    panel_title,
    plot_text,
    scatter,
    split_arm,
    vline,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    import polars as pl

    from tracker.analysis.expectations import Expectations

TITLE = "GPT-2 124M: FlashAdamW vs AdamW, matched init+data"
HEIGHT = 480
LEFT_TITLE, RIGHT_TITLE = "Training loss (EMA-smoothed)", "Raw loss, divergence arm"


def _drawable(values: np.ndarray) -> np.ndarray:
    """Non-finite losses become NaN: plotly draws a gap there (and cannot draw inf)."""
    return np.where(np.isfinite(values), values, np.nan)


def arm_order(arms: list[str], exp: Expectations) -> list[str]:
    """The expectations' arms first (baseline, candidate, seed twin, divergent), then by name."""
    tr = exp.training
    known = [tr.baseline, tr.candidate, tr.seed_twin, tr.divergent, *ARM_STYLES]
    first = [a for a in dict.fromkeys(known) if a in arms]
    return first + sorted(a for a in arms if a not in first)


def training_trajectories(
    curves: Mapping[str, pl.DataFrame],
    exp: Expectations,
    *,
    max_points: int = DEFAULT_MAX_POINTS,
    gpu: str | None = None,
    smoothed: Mapping[str, pl.Series] | None = None,
) -> Figure:
    """The study's two-panel ``gpt_trajectories`` figure.

    Left: every arm's loss, EMA-smoothed (``exp.training.ema_alpha``) over its FULL series.
    Right: the raw loss of the divergence arm(s) (the variant of ``exp.training.divergent``)
    and of the baseline arm, on a log axis, with the step where the loss stops being finite.
    Each trace is then downsampled for drawing only, to at most ``max_points`` points
    (min/max preserving), and the figure says so. One panel when there is no divergence arm.
    The left panel's y axis shows the loss from 10% of the steps on, as the index's figures
    (the first drop would flatten the curves into one line). ``smoothed``: arm -> its EMA,
    when the caller has it.
    """
    tr = exp.training
    title = TITLE + (f" ({plot_text(gpu)})" if gpu else "")
    present = arm_order([arm for arm, frame in curves.items() if frame.height > 0], exp)
    if not present:
        return empty_figure(title, HEIGHT, "no training curves in this job")

    divergent_variant = split_arm(tr.divergent)[0]
    right = [a for a in present if split_arm(a)[0] == divergent_variant]
    left = [a for a in present if a not in right]
    palette = Palette()
    traces: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    drawn = total = 0
    late: list[tuple[np.ndarray, np.ndarray]] = []  # the left panel's drawn (step, EMA)

    def add(arm: str, values: np.ndarray, panel: str, *, raw_baseline: bool = False) -> None:
        nonlocal drawn, total
        steps = curves[arm].get_column("step").to_numpy()
        x, y = downsample(steps, _drawable(values), max_points)
        if not panel:
            late.append((x, y))
        drawn += len(x)
        total += len(steps)
        label, color, dash = arm_style(arm, palette)
        if raw_baseline:
            label = "AdamW raw (ref)" if arm == "ref_s0" else f"{label}, raw"
        traces.append(
            scatter(
                x=x,
                y=y,
                mode="lines",
                name=plot_text(label),
                showlegend=not raw_baseline,
                line=dict(color=color, width=1 if raw_baseline else 2, dash=dash),
                xaxis=f"x{panel}",
                yaxis=f"y{panel}",
            )
        )

    smoothed = smoothed or {}
    for arm in left:
        series = smoothed.get(arm)
        if series is None:
            series = ema(curves[arm].get_column("value"), tr.ema_alpha)
        add(arm, series.to_numpy(), "")
    for arm in right:
        values = curves[arm].get_column("value").to_numpy()
        add(arm, values, "2")
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            step = int(curves[arm].get_column("step")[int(bad[0])])
            shape, text = vline(step, f"non-finite from step {step:,}", "x2", "y2")
            shapes.append(shape)
            notes.append(text)
    baseline = curves.get(tr.baseline)
    if right and baseline is not None and baseline.height > 0:
        add(tr.baseline, baseline.get_column("value").to_numpy(), "2", raw_baseline=True)

    sampled = (
        f"{drawn:,} of {total:,} curve points drawn (per-bucket first/last/min/max kept)"
        if drawn < total
        else f"all {total:,} curve points drawn"
    )
    yaxis = axis(anchor="x", title=dict(text="train loss, EMA"))
    zoom = late_range(late)
    if zoom is not None:
        yaxis["range"] = list(zoom)
        sampled += f"; left y axis from {ZOOM_AFTER:.0%} of the steps on (double-click: all)"
    notes.append(
        footnote(f"{sampled}; EMA smoothing (alpha={tr.ema_alpha:g}) and verdicts use every step")
    )
    panels: dict[str, Any] = {}
    if right:
        left_domain, right_domain = columns((0.62, 0.38), 0.08)
        notes += [panel_title(LEFT_TITLE, left_domain), panel_title(RIGHT_TITLE, right_domain)]
        panels["xaxis2"] = axis(domain=right_domain, anchor="y2", title=dict(text="step"))
        panels["yaxis2"] = axis(
            anchor="x2", type="log", dtick=1, title=dict(text="train loss (log scale)")
        )
    else:
        left_domain = [0.0, 1.0]
        notes.append(panel_title(LEFT_TITLE, left_domain))
    return figure(
        data=traces,
        layout=layout(
            title,
            HEIGHT,
            margin=dict(l=70, r=30, t=110, b=105),
            xaxis=axis(domain=left_domain, anchor="y", title=dict(text="step")),
            yaxis=yaxis,
            shapes=shapes,
            annotations=notes,
            **panels,
        ),
    )
