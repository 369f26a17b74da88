"""Training loss trajectories: EMA-smoothed arms, and the raw divergence arm beside them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracker.figures.style import (
    Figure,
    Palette,
    arm_style,
    axis,
    columns,
    empty_figure,
    figure,
    footnote,
    layout,
    panel_title,
    plot_text,
    scatter,
    vline,
)
from tracker.summary.arrays import ZOOM_AFTER
from tracker.summary.trajectories import TrajectoryDrawing

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

HEIGHT = 480
LEFT_TITLE, RIGHT_TITLE = "Training loss (EMA-smoothed)", "Raw loss, divergence arm"
# every left arm logged too sparsely for an EMA (an eval curve every 250 steps): as logged
SPARSE_TITLE, SPARSE_AXIS = "Loss as logged", "loss"


def trajectories_figure(
    drawing: TrajectoryDrawing, exp: Expectations, *, gpu: str | None = None
) -> Figure:
    """The ``gpt_trajectories`` figure of a drawing, titled by its study, with the job's GPU."""
    study = exp.study
    own = study.trajectories if study else None
    title = own or f"{study.title if study else exp.study_name}: training runs"
    title = plot_text(title) + (f" ({plot_text(gpu)})" if gpu else "")
    if not drawing.lines:
        return empty_figure(title, HEIGHT, "no training curves in this job")
    shapes, notes = [], []
    for step in drawing.non_finite_from:
        shape, text = vline(step, f"non-finite from step {step:,}", "x2", "y2")
        shapes.append(shape)
        notes.append(text)
    drawn, total = drawing.drawn, drawing.total
    sampled = (
        f"{drawn:,} of {total:,} curve points drawn (per-bucket first/last/min/max kept)"
        if drawn < total
        else f"all {total:,} curve points drawn"
    )
    left = [line for line in drawing.lines if not line.right]
    sparse = bool(left) and all(line.as_logged for line in left)
    yaxis = axis(anchor="x", title=dict(text=SPARSE_AXIS if sparse else "train loss, EMA"))
    if drawing.zoom is not None:
        yaxis["range"] = list(drawing.zoom)
        sampled += f"; left y axis from {ZOOM_AFTER:.0%} of the steps on (double-click: all)"
    alpha = exp.training.ema_alpha
    if sparse:
        said = f"as logged: an EMA (alpha={alpha:g}) at these step gaps would only redraw them"
    elif any(line.as_logged for line in left):
        said = f"EMA (alpha={alpha:g}) over every step; marked arms as logged (too sparse for one)"
    else:
        said = f"EMA smoothing (alpha={alpha:g}) and verdicts use every step"
    notes.append(footnote(f"{sampled}; {said}"))
    left_domain, panels = _panels(drawing, notes, SPARSE_TITLE if sparse else LEFT_TITLE)
    return figure(
        data=_arm_traces(drawing),
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


def _arm_traces(drawing: TrajectoryDrawing) -> list[dict[str, Any]]:
    """One line per arm: the smoothed arms on the left, the raw divergence arm on the right
    (raw baselines drawn thin, out of the legend)."""
    palette = Palette()
    traces = []
    for line in drawing.lines:
        label, color, dash = arm_style(line.arm, palette)
        if line.raw_baseline:
            label = "AdamW raw (ref)" if line.arm == "ref_s0" else f"{label}, raw"
        panel = "2" if line.right else ""
        traces.append(
            scatter(
                x=line.x,
                y=line.y,
                mode="lines+markers" if line.as_logged else "lines",
                marker=dict(size=5),
                name=plot_text(label),
                showlegend=not line.raw_baseline,
                line=dict(color=color, width=1 if line.raw_baseline else 2, dash=dash),
                xaxis=f"x{panel}",
                yaxis=f"y{panel}",
            )
        )
    return traces


def _panels(
    drawing: TrajectoryDrawing, notes: list[Any], left_title: str
) -> tuple[list[float], dict[str, Any]]:
    """The left panel's x domain and the right panel's axes (when an arm is drawn there);
    the panels' titles go to ``notes``."""
    panels: dict[str, Any] = {}
    if any(line.right for line in drawing.lines):
        left_domain, right_domain = columns((0.62, 0.38), 0.08)
        notes += [panel_title(left_title, left_domain), panel_title(RIGHT_TITLE, right_domain)]
        panels["xaxis2"] = axis(domain=right_domain, anchor="y2", title=dict(text="step"))
        panels["yaxis2"] = axis(
            anchor="x2", type="log", dtick=1, title=dict(text="train loss (log scale)")
        )
    else:
        left_domain = [0.0, 1.0]
        notes.append(panel_title(left_title, left_domain))
    return left_domain, panels
