"""Figures across jobs that stay readable from two jobs to thousands (the training loss
across jobs: ``tracker.figures.armloss``).

Per-variant figures (bytes/param, validation loss) put each job at its time (``time``
metadata, else ingest time) on a date axis: one line per variant, hover naming the job, so
a thousand jobs are a thousand points of a trend, not a thousand tick labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from tracker.figures.style import (
    Figure,
    Palette,
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

if TYPE_CHECKING:
    import polars as pl

    from tracker.analysis.expectations import Expectations

BPP_HEIGHT = 460
VAL_HEIGHT = 420
NOTE_WIDTH = 104  # characters of a footnote line in a full-width figure
FAIL_COLOR = "#c62828"
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


def _times(jobs: Sequence[Job]) -> np.ndarray:
    """Each job's time in milliseconds since 1970 (what a plotly.js date axis takes): as a
    typed array, a third of the bytes of date strings."""
    return np.array([job.time.timestamp() * 1000 for job in jobs], dtype=np.float64)


def _time_axis() -> dict[str, Any]:
    return axis(type="date", title=dict(text="job time (time metadata, else ingest time)"))


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


def _per_job_marks(points: int, color: str) -> dict[str, Any]:
    """A per-variant line's mode and markers: a marker per job up to ``MARKS_UP_TO`` jobs,
    a plain line past that (the markers would merge into it anyway)."""
    if points <= MARKS_UP_TO:
        return dict(mode="lines+markers", marker=dict(color=color, size=7))
    return dict(mode="lines")


def _spread_band(
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


def bpp_across_jobs(
    probes: pl.DataFrame, jobs: Sequence[Job], exp: Expectations, choice: ModelChoice
) -> Figure:
    """Measured params+state+grads bytes/param of one model per variant, over job time.

    ``probes`` is ``tracker.queries.tables.probes``; one line per variant (expectations'
    order first), the analytic total of each variant as a dotted line of its colour, and a
    red ring on every value more than the tolerance away from it. Failed probes are not
    drawn and are counted under the plot.
    """
    import polars as pl

    title = "Bytes/param (params+optimizer+grads) across jobs" + (
        f": {plot_text(choice.model)}" if choice.model else ""
    )
    if choice.model is None:
        return empty_figure(title, BPP_HEIGHT, plot_text(choice.why))
    rows = probes.filter(pl.col("model") == choice.model)
    ok = rows.filter(pl.col("n_params").is_not_null())
    order = {job.name: i for i, job in enumerate(jobs)}
    times = _times(jobs)
    palette = Palette()
    traces: list[dict[str, Any]] = []
    rings: dict[str, list[Any]] = {"x": [], "y": [], "text": []}  # x: job positions
    references: list[tuple[dict[str, Any], dict[str, Any]]] = []
    present = ok.get_column("variant").unique(maintain_order=True).to_list()
    for variant in variant_order(present, exp):
        values = dict(
            ok.filter(pl.col("variant") == variant).select("job", "bpp_total").iter_rows()
        )
        found = sorted((order[job], value) for job, value in values.items() if job in order)
        name = plot_text(variant)
        color = palette(variant)
        total = analytic_total(exp, variant)
        positions = [i for i, _ in found]
        y = [value for _, value in found]
        text = [plot_text(jobs[i].name) for i in positions]
        traces.append(
            scatter(
                x=times[positions],
                y=y,
                text=text,
                name=name,
                legendgroup=name,
                line=dict(color=color, width=1.5),
                hovertemplate=f"%{{text}}: {name} %{{y:.3f}} B/param<extra></extra>",
                **_per_job_marks(len(found), color),
            )
        )
        if total is not None:
            references.append(_reference(total, color, f"{total:g}"))
            for xi, yi, ti in zip(positions, y, text, strict=True):
                if abs(yi - total) > exp.memory.bpp_tolerance:
                    rings["x"].append(xi)
                    rings["y"].append(yi)
                    rings["text"].append(f"{ti}: {name}")
    if rings["x"]:
        traces.append(
            scatter(
                x=times[rings["x"]],
                y=rings["y"],
                text=rings["text"],
                mode="markers",
                name=f"off the analytic by > {exp.memory.bpp_tolerance:g}",
                marker=dict(size=13, color="rgba(0,0,0,0)", line=dict(color=FAIL_COLOR, width=2)),
                hovertemplate="%{text} %{y:.3f} B/param, off its analytic total<extra></extra>",
            )
        )
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
        notes.append(
            f"Not drawn, failed probe{'s' if len(names) > 1 else ''}: {short_list(names)}."
        )
    notes = wrap_lines(notes, NOTE_WIDTH)
    return figure(
        data=traces,
        layout=layout(
            title,
            BPP_HEIGHT,
            margin=dict(l=70, r=60, t=100, b=max(120, 66 + 14 * len(notes))),
            hovermode="closest",
            xaxis=_time_axis(),
            yaxis=axis(title=dict(text="measured bytes / parameter"), rangemode="tozero"),
            shapes=[shape for shape, _ in references],
            annotations=[label for _, label in references] + [footnote_lines(notes, -52)],
        ),
    )


def val_loss_across_jobs(runs: pl.DataFrame, jobs: Sequence[Job], exp: Expectations) -> Figure:
    """Validation loss per variant over job time: mean over seeds, the std as an error bar.

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
    order = {job.name: i for i, job in enumerate(jobs)}
    times = _times(jobs)
    palette = Palette()
    traces = []
    references: list[tuple[dict[str, Any], dict[str, Any]]] = []
    referenced: set[str] = set()
    span: list[float] = []  # every drawn value, and the paper's
    banded = False  # a line past MARKS_UP_TO jobs: its spread is a band, not error bars
    series = with_val.select("model", "variant").unique(maintain_order=True).rows()
    variants = variant_order([v for _, v in series], exp)
    series.sort(key=lambda mv: (variants.index(mv[1]), models.index(mv[0])))
    for model, variant in series:
        part = with_val.filter((pl.col("model") == model) & (pl.col("variant") == variant))
        found = sorted(
            ((order[row["job"]], row) for row in part.iter_rows(named=True) if row["job"] in order),
            key=lambda item: item[0],
        )
        name = plot_text(f"{variant} ({model})" if several else variant)
        color = palette(variant)
        means = [row["val_loss_mean"] for _, row in found]
        std = [row["val_loss_std"] or 0.0 for _, row in found]
        x = times[[i for i, _ in found]]
        marks = _per_job_marks(len(found), color)
        if len(found) <= MARKS_UP_TO:
            marks["error_y"] = dict(
                type="data", array=std, visible=True, color=color, thickness=1, width=3
            )
        else:
            traces.append(_spread_band(x, means, std, color, name))
            banded = True
        traces.append(
            scatter(
                x=x,
                y=means,
                text=[plot_text(jobs[i].name) for i, _ in found],
                customdata=[
                    [f"{s:.4f}", row["seeds"]] for s, (_, row) in zip(std, found, strict=True)
                ],
                name=name,
                legendgroup=name,
                line=dict(color=color, width=1.5),
                **marks,
                hovertemplate=(
                    f"%{{text}}: {name} %{{y:.4f}} \u00b1 %{{customdata[0]}}"
                    " (%{customdata[1]} seeds)<extra></extra>"
                ),
            )
        )
        paper = exp.training.val_loss.get(variant)
        if paper is not None and variant not in referenced:
            referenced.add(variant)
            references.append(_reference(paper, color, f"{paper:g}"))
            span.append(paper)
        for mean, spread in zip(means, std, strict=True):
            span += [mean - spread, mean + spread]
    bars = f"Error bars (a shaded band past {MARKS_UP_TO} jobs)" if banded else "Error bars"
    notes = [
        f"{bars}: standard deviation over seeds (none with one seed). "
        "Dotted, labelled on the right: the paper's value (Table 3)."
    ]
    missing = runs.filter(pl.col("val_loss_mean").is_null())
    if not missing.is_empty():
        gone = missing.group_by("variant", maintain_order=True).agg(
            pl.col("job"), pl.col("any_diverged").all()
        )
        parts = [
            f"{plot_text(v)} ({'diverged' if d else 'none'} in "
            f"{short_list([plot_text(j) for j in js])})"
            for v, js, d in gone.iter_rows()
        ]
        notes.append("No validation loss: " + "; ".join(parts) + ".")
    low, high = min(span), max(span)
    pad = max(0.08 * (high - low), 0.001)
    notes = wrap_lines(notes, NOTE_WIDTH)
    return figure(
        data=traces,
        layout=layout(
            title,
            VAL_HEIGHT,
            margin=dict(l=70, r=60, t=100, b=max(120, 66 + 14 * len(notes))),
            hovermode="closest",
            xaxis=_time_axis(),
            yaxis=axis(
                title=dict(text="validation loss"),
                tickformat=".3f",
                range=[low - pad, high + pad],
            ),
            shapes=[shape for shape, _ in references],
            annotations=[label for _, label in references] + [footnote_lines(notes, -52)],
        ),
    )
