"""Figures across jobs: bytes/param and validation loss per variant, one arm's loss per job.

The x axis of the per-variant figures is the jobs, in job order (``time`` metadata, else
ingest time), each tick labelled with the job's time. Curves are EMA-smoothed over their
full series (``drawn_curve``) and only then downsampled for drawing, as in the job figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from tracker.analysis.smoothing import ema
from tracker.figures.downsample import DEFAULT_MAX_POINTS, POINTS_PER_BUCKET, downsample
from tracker.figures.style import (
    MUTED,
    Palette,
    arm_style,
    axis,
    empty_figure,
    footnote,
    layout,
    plot_text,
    short_list,
)

if TYPE_CHECKING:
    import polars as pl

    from tracker.analysis.expectations import Expectations

BPP_HEIGHT = 460
VAL_HEIGHT = 420
ARM_HEIGHT = 420
# Points drawn across all the jobs of one arm figure, and per curve at most / at least.
ARM_POINT_BUDGET = 4000
ARM_MAX_POINTS = 1000
ARM_MIN_POINTS = 250
FAIL_COLOR = "#c62828"
# Where on the Viridis scale the oldest job's colour is (the newest is at 0, darkest).
JOB_RAMP_END = 0.8
# A curve figure's y axis starts its range after this share of the steps (the first drop
# would flatten the rest); double-click shows everything.
ZOOM_AFTER = 0.1


@dataclass(frozen=True)
class Job:
    """A job on the x axis: its name and when it ran (what orders the axis)."""

    name: str
    time: datetime


@dataclass(frozen=True)
class DrawnCurve:
    """One arm's loss, EMA-smoothed over all its points, then downsampled for drawing."""

    x: np.ndarray  # the kept steps
    y: np.ndarray  # the EMA at those steps (float32; NaN where not finite)
    points: int  # length of the full series
    first_bad: int | None  # first step whose raw loss is not finite


def points_per_curve(jobs: int) -> int:
    """How many points each job's curve of an arm figure may draw: a budget per figure."""
    per_job = ARM_POINT_BUDGET // max(jobs, 1)
    per_job = min(ARM_MAX_POINTS, max(ARM_MIN_POINTS, per_job))
    return per_job - per_job % POINTS_PER_BUCKET


def drawn_curve(
    curve: pl.DataFrame, alpha: float, max_points: int = DEFAULT_MAX_POINTS
) -> DrawnCurve:
    """``curve`` (``step``, ``value``) smoothed on all its points, then reduced for drawing.

    Steps are kept as int32 when they fit and values as float32: plotly writes arrays as
    binary, so this halves the bytes of a drawn curve at no visible cost.
    """
    steps = curve.get_column("step").to_numpy()
    raw = curve.get_column("value").to_numpy()
    smoothed = ema(curve.get_column("value"), alpha).to_numpy()
    x, y = downsample(steps, np.where(np.isfinite(smoothed), smoothed, np.nan), max_points)
    bad = np.flatnonzero(~np.isfinite(raw))
    small = x.size == 0 or (x.min() >= np.iinfo(np.int32).min and x.max() <= np.iinfo(np.int32).max)
    return DrawnCurve(
        x=x.astype(np.int32) if small else x,
        y=y.astype(np.float32),
        points=int(steps.size),
        first_bad=int(steps[bad[0]]) if bad.size else None,
    )


def job_colors(jobs: Sequence[Job]) -> dict[str, str]:
    """One colour per job, from light green (oldest) to dark purple (newest): the same in
    every figure, with hues far enough apart to tell overlapping curves apart."""
    from plotly.colors import sample_colorscale

    n = len(jobs)
    if n == 0:
        return {}
    places = [JOB_RAMP_END * (n - 1 - i) / max(n - 1, 1) for i in range(n)]
    colors = sample_colorscale("Viridis", places, colortype="rgb")
    return {job.name: color for job, color in zip(jobs, colors, strict=True)}


def _job_axis(jobs: Sequence[Job]) -> dict[str, Any]:
    labels = [plot_text(job.name) for job in jobs]
    ticks = [
        f"{label}<br><span style='font-size:10px'>{job.time:%Y-%m-%d %H:%M}</span>"
        for label, job in zip(labels, jobs, strict=True)
    ]
    return axis(
        type="category",
        categoryorder="array",
        categoryarray=labels,
        tickvals=labels,
        ticktext=ticks,
        range=[-0.5, len(labels) - 0.5],  # every job, with or without a value
        title=dict(text="job (in job order: time metadata, else ingest time)"),
        showgrid=False,
    )


def variant_order(present: Sequence[str], exp: Expectations) -> list[str]:
    order = [v for v in exp.memory.expected_bpp if v in present]
    return order + [v for v in present if v not in order]


def analytic_total(exp: Expectations, variant: str) -> float | None:
    bpp = exp.memory.expected_bpp.get(variant)
    if bpp is None or bpp.params is None or bpp.state is None or bpp.grads is None:
        return None
    return bpp.params + bpp.state + bpp.grads


@dataclass(frozen=True)
class ModelChoice:
    """The model of the bytes/param figure, and why (plain text, not escaped)."""

    model: str | None
    why: str


def pick_model(probes: pl.DataFrame, prefix: str) -> ModelChoice:
    """The largest ``prefix`` model measured for every variant probed, in every job with probes.

    The figure compares one model across jobs, so it needs that model everywhere. When no
    model is complete, the one with the most successful probes (then the largest) is used.
    """
    import polars as pl

    scaling = probes.filter(pl.col("model").str.starts_with(prefix))
    if scaling.is_empty():
        return ModelChoice(None, f"no {prefix}* memory probes in these jobs")
    ok = pl.col("n_params").is_not_null()
    jobs = scaling.get_column("job").n_unique()
    stats = (
        scaling.group_by("model", maintain_order=True)
        .agg(
            size=pl.col("n_params").max(),
            measured=ok.sum(),
            failed=(~ok).sum(),
            jobs=pl.col("job").filter(ok).n_unique(),
        )
        .filter(pl.col("measured") > 0)
    )
    if stats.is_empty():
        return ModelChoice(None, f"no successful {prefix}* memory probes in these jobs")
    complete = stats.filter((pl.col("failed") == 0) & (pl.col("jobs") == jobs))
    by_size = stats.sort("size", descending=True, nulls_last=True)
    if not complete.is_empty():
        model = complete.sort("size", descending=True).get_column("model")[0]
        bigger = by_size.filter(pl.col("size") > complete.get_column("size").max())
        if bigger.is_empty():
            why = f"the largest {prefix}* model, measured for every variant in every job"
        else:
            skipped = ", ".join(
                f"{m}: {f} failed probe{'s' if f != 1 else ''}" if f else f"{m}: not in every job"
                for m, f in bigger.select("model", "failed").iter_rows()
            )
            why = (
                f"the largest {prefix}* model measured for every variant in every job "
                f"(larger: {skipped})"
            )
        return ModelChoice(model, why)
    best = stats.sort(["jobs", "measured", "size"], descending=True).row(0, named=True)
    return ModelChoice(
        best["model"],
        f"no {prefix}* model was measured for every variant in every job; "
        f"{best['model']} has the most successful probes ({best['failed']} failed)",
    )


def bpp_across_jobs(
    probes: pl.DataFrame, jobs: Sequence[Job], exp: Expectations, choice: ModelChoice
) -> go.Figure:
    """Measured params+state+grads bytes/param of one model per variant, across jobs.

    ``probes`` is ``tracker.queries.tables.probes``; one line per variant (expectations'
    order first), the analytic total of each variant as a dotted line of its colour. Failed
    probes are not drawn and are listed under the plot.
    """
    import polars as pl

    title = "Bytes/param (params+optimizer+grads) across jobs" + (
        f": {plot_text(choice.model)}" if choice.model else ""
    )
    if choice.model is None:
        return empty_figure(title, BPP_HEIGHT, plot_text(choice.why))
    rows = probes.filter(pl.col("model") == choice.model)
    ok = rows.filter(pl.col("n_params").is_not_null())
    labels = [plot_text(job.name) for job in jobs]
    palette = Palette()
    traces = []
    references: list[tuple[dict[str, Any], dict[str, Any]]] = []
    present = ok.get_column("variant").unique(maintain_order=True).to_list()
    for variant in variant_order(present, exp):
        values = dict(
            ok.filter(pl.col("variant") == variant).select("job", "bpp_total").iter_rows()
        )
        name = plot_text(variant)
        color = palette(variant)
        total = analytic_total(exp, variant)
        y = [values.get(job.name) for job in jobs]
        off = [
            total is not None and v is not None and abs(v - total) > exp.memory.bpp_tolerance
            for v in y
        ]
        traces.append(
            go.Scatter(
                x=labels,
                y=y,
                mode="lines+markers+text" if any(off) else "lines+markers",
                name=name,
                legendgroup=name,
                line=dict(color=color, width=2),
                marker=dict(
                    size=[11 if o else 8 for o in off],
                    line=dict(color=[FAIL_COLOR if o else color for o in off], width=2),
                ),
                # the value of a point off its analytic total, written under it
                text=[
                    f"{v:.3f}" if o and v is not None else "" for v, o in zip(y, off, strict=True)
                ],
                textposition="bottom center",
                textfont=dict(color=FAIL_COLOR, size=11),
                hovertemplate=f"{name}, %{{x}}: %{{y:.3f}} B/param<extra></extra>",
            )
        )
        if total is not None:
            references.append(_reference(total, color, f"{total:g}"))
    notes = [
        f"{plot_text(choice.model)}: {plot_text(choice.why)}.",
        "Dotted, labelled on the right: each variant's analytic total; red ring: more than "
        f"{exp.memory.bpp_tolerance:g} B/param away from it.",
    ]
    failed = rows.filter(pl.col("n_params").is_null())
    if not failed.is_empty():
        names = [
            f"{plot_text(v)} in {plot_text(j)}"
            for j, v in failed.select("job", "variant").iter_rows()
        ]
        shown = short_list(names)
        notes.append(f"Not drawn, failed probe{'s' if len(names) > 1 else ''}: {shown}.")
    return go.Figure(
        data=traces,
        layout=layout(
            title,
            BPP_HEIGHT,
            margin=dict(l=70, r=60, t=100, b=130),
            xaxis=_job_axis(jobs),
            yaxis=axis(
                title=dict(text="measured bytes / parameter"),
                rangemode="tozero",
            ),
            shapes=[shape for shape, _ in references],
            annotations=[label for _, label in references] + [_footnote_lines(notes)],
        ),
    )


def _reference(y: float, color: str, label: str) -> tuple[dict[str, Any], dict[str, Any]]:
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


def _footnote_lines(lines: Sequence[str], shift: int = -62) -> dict[str, Any]:
    """Muted lines under the plot (texts already escaped), below the x axis title."""
    note = footnote("<br>".join(lines))
    note["yshift"] = shift
    return note


def val_loss_across_jobs(runs: pl.DataFrame, jobs: Sequence[Job], exp: Expectations) -> go.Figure:
    """Validation loss per variant across jobs: mean over seeds, the std as an error bar.

    ``runs`` is ``tracker.queries.tables.runs(..., aggregate_seeds=True)``. One trace per
    variant (per model and variant when several models trained); the paper's value of a
    variant, when the expectations have one, is a dotted line of its colour.
    """
    import polars as pl

    title = "Validation loss across jobs (mean \u00b1 std over seeds)"
    with_val = runs.filter(pl.col("val_loss_mean").is_not_null())
    if with_val.is_empty():
        what = "no training arm has" if runs.height else "no training arms in these jobs, no"
        return empty_figure(title, VAL_HEIGHT, f"{what} validation loss")
    models = with_val.get_column("model").unique(maintain_order=True).to_list()
    several = len(models) > 1
    labels = [plot_text(job.name) for job in jobs]
    palette = Palette()
    traces = []
    references: list[tuple[dict[str, Any], dict[str, Any]]] = []
    referenced: set[str] = set()
    span: list[float] = []  # every drawn value: plotly's grouped scatter would start at 0
    series = with_val.select("model", "variant").unique(maintain_order=True).rows()
    order = variant_order([v for _, v in series], exp)
    series.sort(key=lambda mv: (order.index(mv[1]), models.index(mv[0])))
    for model, variant in series:
        part = with_val.filter((pl.col("model") == model) & (pl.col("variant") == variant))
        by_job = {row["job"]: row for row in part.iter_rows(named=True)}
        found = [by_job.get(job.name) for job in jobs]
        name = plot_text(f"{variant} ({model})" if several else variant)
        color = palette(variant)
        std = [(r["val_loss_std"] or 0.0) if r else None for r in found]
        traces.append(
            go.Scatter(
                x=labels,
                y=[r["val_loss_mean"] if r else None for r in found],
                mode="lines+markers",
                name=name,
                legendgroup=name,
                line=dict(color=color, width=2),
                marker=dict(size=8),
                error_y=dict(
                    type="data", array=std, visible=True, color=color, thickness=1.5, width=6
                ),
                customdata=[
                    [f"{s:.4f}", r["seeds"]] if r is not None and s is not None else ["", 0]
                    for r, s in zip(found, std, strict=True)
                ],
                hovertemplate=(
                    f"{name}, %{{x}}: %{{y:.4f}} \u00b1 %{{customdata[0]}}"
                    " (%{customdata[1]} seeds)<extra></extra>"
                ),
            )
        )
        paper = exp.training.val_loss.get(variant)
        if paper is not None and variant not in referenced:
            referenced.add(variant)
            references.append(_reference(paper, color, f"{paper:g}"))
        for row, spread in zip(found, std, strict=True):
            if row is not None and spread is not None:
                span += [row["val_loss_mean"] - spread, row["val_loss_mean"] + spread]
        span += [] if paper is None else [paper]
    notes = [
        "Error bars: standard deviation over seeds (none with one seed). "
        "Dotted, labelled on the right: the paper's value (Table 3)."
    ]
    missing = runs.filter(pl.col("val_loss_mean").is_null())
    if not missing.is_empty():
        gone = missing.group_by("variant", maintain_order=True).agg(
            pl.col("job"), pl.col("any_diverged").all()
        )
        parts = [
            f"{plot_text(v)} ({'diverged' if d else 'none'} in {', '.join(map(plot_text, js))})"
            for v, js, d in gone.iter_rows()
        ]
        notes.append("No validation loss: " + "; ".join(parts) + ".")
    low, high = min(span), max(span)
    pad = max(0.08 * (high - low), 0.001)
    low, high = low - pad, high + pad
    return go.Figure(
        data=traces,
        layout=layout(
            title,
            VAL_HEIGHT,
            margin=dict(l=70, r=60, t=100, b=130),
            scattermode="group",
            scattergap=0.6,
            xaxis=_job_axis(jobs),
            yaxis=axis(title=dict(text="validation loss"), tickformat=".3f", range=[low, high]),
            shapes=[shape for shape, _ in references],
            annotations=[label for _, label in references] + [_footnote_lines(notes)],
        ),
    )


def arm_across_jobs(
    arm: str,
    curves: Mapping[str, DrawnCurve],
    colors: Mapping[str, str],
    exp: Expectations,
) -> go.Figure:
    """One arm's EMA-smoothed training loss, one line per job (``curves``: job -> curve, in
    job order). A log y axis when the curves span more than a decade (a divergence)."""
    label, _color, _dash = arm_style(arm, Palette())
    title = f"{plot_text(arm)}: {plot_text(label)}, training loss by job"
    if not curves:
        return empty_figure(title, ARM_HEIGHT, f"no curve of {plot_text(arm)}")
    traces = []
    drawn = total = 0
    bad = []
    finite: list[np.ndarray] = []  # all finite drawn values
    late: list[np.ndarray] = []  # those after the first ZOOM_AFTER of each curve's steps
    for job, curve in curves.items():
        drawn += curve.x.size
        total += curve.points
        if curve.first_bad is not None:
            bad.append(f"{plot_text(job)} from step {curve.first_bad:,}")
        ok = np.isfinite(curve.y)
        finite.append(curve.y[ok])
        if curve.x.size:
            first, last = float(curve.x[0]), float(curve.x[-1])
            late.append(curve.y[ok & (curve.x >= first + ZOOM_AFTER * (last - first))])
        name = plot_text(job)
        traces.append(
            go.Scatter(
                x=curve.x,
                y=curve.y,
                mode="lines",
                name=name,
                line=dict(color=colors.get(job, MUTED), width=1.8),
                hovertemplate=f"{name}, step %{{x:,}}: %{{y:.4f}}<extra></extra>",
            )
        )
    values = np.concatenate(finite) if finite else np.empty(0)
    tail = np.concatenate(late) if late else np.empty(0)
    yaxis = axis(title=dict(text="train loss, EMA"))
    zoom = ""
    if values.size and values.min() > 0 and values.max() / values.min() > 10:
        # a divergence: only a log axis shows both it and the loss before it
        yaxis.update(type="log", dtick=1, title=dict(text="train loss, EMA (log scale)"))
    elif tail.size and values.max() - tail.min() > 1.5 * (tail.max() - tail.min()):
        # the first drop would flatten the rest: range of the loss after it
        low, high = float(tail.min()), float(tail.max())
        pad = 0.06 * (high - low) or 0.01
        yaxis.update(range=[low - pad, high + pad])
        zoom = f"y axis: the loss from {ZOOM_AFTER:.0%} of the steps on (double-click: all of it)"
    sampled = (
        f"downsampled for drawing:<br>{drawn:,} of {total:,} points drawn "
        "(per-bucket first/last/min/max kept)"
        if drawn < total
        else f"all {total:,} points drawn"
    )
    notes = [f"EMA (alpha={exp.training.ema_alpha:g}) over all points, then {sampled}"]
    if zoom:
        notes.append(zoom)
    if bad:
        notes.append("loss not finite (gap in the EMA): " + "; ".join(bad))
    settings = layout(
        title,
        ARM_HEIGHT,
        margin=dict(l=60, r=20, t=62, b=64 + 14 * (len(notes) + (drawn < total))),
        legend=dict(orientation="h", y=1.0, x=0, yanchor="bottom"),
        xaxis=axis(title=dict(text="step")),
        yaxis=yaxis,
        annotations=[_footnote_lines(notes, -52)],
    )
    settings["title"].update(font=dict(size=14), y=0.98, yanchor="top")
    return go.Figure(data=traces, layout=settings)
