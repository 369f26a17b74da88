"""Figures across jobs that stay readable from two jobs to thousands.

Per-variant figures (bytes/param, validation loss) put each job at its time (``time``
metadata, else ingest time) on a date axis: one line per variant, hover naming the job, so
a thousand jobs are a thousand points of a trend, not a thousand tick labels.

Training loss: for each arm, the median over jobs and the band between the 25th and 75th
percentiles, computed on a common step grid from each job's EMA (smoothed over its full
series, then sampled at ``GRID_POINTS`` steps, see ``grid_curve``). On top, the latest
``LATEST`` jobs and the outliers (final smoothed loss outside the quartiles +- 1.5
interquartile ranges, the most extreme ``MAX_OUTLIERS``), each a line named by its job. With
at most ``ALL_LINES_UP_TO`` jobs every job is drawn as its own line instead: a band over
three jobs would pretend to be a distribution.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from tracker.figures.style import (
    Figure,
    Palette,
    arm_style,
    axis,
    empty_figure,
    figure,
    footnote,
    late_range,
    layout,
    packed,
    plot_text,
    scatter,
    short_list,
    unpacked,
)

if TYPE_CHECKING:
    import polars as pl

    from tracker.analysis.expectations import Expectations

BPP_HEIGHT = 460
VAL_HEIGHT = 420
ARM_HEIGHT = 440
FAIL_COLOR = "#c62828"
GRID_POINTS = 160  # steps per job's curve kept for the figures across jobs
ALL_LINES_UP_TO = 8
LATEST = 3
MAX_OUTLIERS = 5
LATEST_COLORS = ("#3b0f70", "#8c2981", "#de4968")  # newest first
OUTLIER_COLOR = "#b3591f"
BAND_COLOR = "rgba(42, 120, 214, 0.18)"
MEDIAN_COLOR = "#2a78d6"
# several jobs: Viridis from light green (oldest) to dark purple (newest)
VIRIDIS = ("#b5de2b", "#6ece58", "#35b779", "#1f9e89", "#26828e", "#31688e", "#3e4989", "#482878")
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


@dataclass(frozen=True)
class GridCurve:
    """One arm's loss in one job, EMA-smoothed over all its points, sampled on a grid.

    ``values[i]`` is the EMA at step ``first + i * (last - first) / (len(values) - 1)``
    (linear interpolation between the steps around it); NaN where the loss had stopped being
    finite (the EMA of a NaN stays NaN).
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
    """An arm's EMA (``smoothed``, over every step) sampled at ``GRID_POINTS`` steps."""
    bad = np.flatnonzero(~np.isfinite(raw))
    first_bad = int(steps[bad[0]]) if bad.size else None
    if steps.size == 0:
        return GridCurve(0, 0, np.empty(0, np.float32), 0, None)
    first, last = int(steps[0]), int(steps[-1])
    grid = np.linspace(first, last, min(GRID_POINTS, steps.size))
    values = np.interp(grid, steps.astype(np.float64), smoothed.astype(np.float64))
    # np.interp spreads a NaN only to its neighbours: the EMA is NaN from its first on
    nan = np.flatnonzero(~np.isfinite(smoothed))
    if nan.size:
        values[grid >= steps[nan[0]]] = np.nan
    return GridCurve(first, last, values.astype(np.float32), int(steps.size), first_bad)


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


def _footnote_lines(lines: Sequence[str], shift: int = -62) -> dict[str, Any]:
    """Muted lines under the plot (texts already escaped), below the x axis title."""
    note = footnote("<br>".join(lines))
    note["yshift"] = shift
    return note


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
    return figure(
        data=traces,
        layout=layout(
            title,
            BPP_HEIGHT,
            margin=dict(l=70, r=60, t=100, b=120),
            hovermode="closest",
            xaxis=_time_axis(),
            yaxis=axis(title=dict(text="measured bytes / parameter"), rangemode="tozero"),
            shapes=[shape for shape, _ in references],
            annotations=[label for _, label in references] + [_footnote_lines(notes, -52)],
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
    return figure(
        data=traces,
        layout=layout(
            title,
            VAL_HEIGHT,
            margin=dict(l=70, r=60, t=100, b=120),
            hovermode="closest",
            xaxis=_time_axis(),
            yaxis=axis(
                title=dict(text="validation loss"),
                tickformat=".3f",
                range=[low - pad, high + pad],
            ),
            shapes=[shape for shape, _ in references],
            annotations=[label for _, label in references] + [_footnote_lines(notes, -52)],
        ),
    )


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


def _last_finite(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if finite.size else np.nan


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
    names = list(curves)
    first = min(c.first for c in curves.values())
    last = max(c.last for c in curves.values())
    grid = np.linspace(first, last, GRID_POINTS) if last > first else np.array([float(first)])
    table = np.vstack([_on_grid(curves[name], grid) for name in names])
    steps = grid.round().astype(np.int64)
    traces: list[dict[str, Any]] = []
    drawn: list[tuple[np.ndarray, np.ndarray]] = []

    def line(name: str, color: str, width: float, dash: str = "solid", tag: str = "") -> None:
        values = table[names.index(name)]
        keep = np.isfinite(values) | ((grid >= curves[name].first) & (grid <= curves[name].last))
        x, y = steps[keep], values[keep].astype(np.float32)
        drawn.append((x, y))
        shown = plot_text(name)
        traces.append(
            scatter(
                x=x,
                y=y,
                mode="lines",
                name=f"{shown}{tag}",
                line=dict(color=color, width=width, dash=dash),
                hovertemplate=f"{shown}{tag}, step %{{x:,}}: %{{y:.4f}}<extra></extra>",
            )
        )

    notes: list[str] = []
    if len(names) <= ALL_LINES_UP_TO:
        colors = _ramp(len(names))
        for name, color in zip(names, colors, strict=True):
            line(name, color, 1.8)
        notes.append(f"one line per job ({len(names)}), darker is newer")
    else:
        with np.errstate(all="ignore"):
            counted = np.isfinite(table).sum(axis=0)
            ok = counted >= 2
            quartiles = np.full((3, grid.size), np.nan)
            if ok.any():
                quartiles[:, ok] = np.nanpercentile(table[:, ok], [25, 50, 75], axis=0)
        low, median, high = (q.astype(np.float32) for q in quartiles)
        traces.append(
            scatter(
                x=steps[ok],
                y=high[ok],
                mode="lines",
                line=dict(width=0),
                hoverinfo="skip",
                showlegend=False,
            )
        )
        traces.append(
            scatter(
                x=steps[ok],
                y=low[ok],
                mode="lines",
                fill="tonexty",
                fillcolor=BAND_COLOR,
                line=dict(width=0),
                name=f"25th\u201375th percentile over {len(names)} jobs",
                hoverinfo="skip",
            )
        )
        traces.append(
            scatter(
                x=steps[ok],
                y=median[ok],
                mode="lines",
                name="median over jobs",
                line=dict(color=MEDIAN_COLOR, width=2),
                hovertemplate="median over jobs, step %{x:,}: %{y:.4f}<extra></extra>",
            )
        )
        drawn.append((steps[ok], median[ok]))
        finals = {name: _last_finite(table[i]) for i, name in enumerate(names)}
        newest = names[-latest:][::-1]
        odd = [name for name in outliers(finals) if name not in newest]
        for name in odd:
            line(name, OUTLIER_COLOR, 1.2, "dot", " (outlier)")
        for name, color in zip(newest, LATEST_COLORS, strict=False):
            line(name, color, 1.8, tag=" (latest)" if name == names[-1] else "")
        notes.append(
            f"band: 25th\u201375th percentile of {len(names)} jobs at each step; lines: the "
            f"{len(newest)} latest jobs and {len(odd)} outlier{'s' if len(odd) != 1 else ''} "
            "(final loss beyond the quartiles \u00b1 1.5 IQR)"
        )
    bad = [f"{plot_text(n)} from step {c.first_bad:,}" for n, c in curves.items() if c.first_bad]
    values = table[np.isfinite(table)]
    yaxis = axis(title=dict(text="train loss, EMA"))
    if values.size and values.min() > 0 and values.max() / values.min() > 10:
        # a divergence: only a log axis shows both it and the loss before it
        yaxis.update(type="log", dtick=1, title=dict(text="train loss, EMA (log scale)"))
    else:
        zoom = late_range(drawn)
        if zoom is not None:
            yaxis["range"] = list(zoom)
            notes.append("y axis: the loss from 10% of the steps on (double-click: all of it)")
    notes.insert(
        0,
        f"EMA (alpha={exp.training.ema_alpha:g}) over every step of each job, "
        f"drawn at {grid.size} steps",
    )
    if bad:
        notes.append(f"loss not finite (gap in the EMA) in {len(bad)}: {short_list(bad, 3)}")
    settings = layout(
        title,
        ARM_HEIGHT,
        margin=dict(l=60, r=20, t=70, b=64 + 14 * len(notes)),
        legend=dict(orientation="h", y=1.0, x=0, yanchor="bottom", font=dict(size=11)),
        hovermode="closest",
        xaxis=axis(title=dict(text="step")),
        yaxis=yaxis,
        annotations=[_footnote_lines(notes, -52)],
    )
    settings["title"].update(font=dict(size=14))
    return figure(data=traces, layout=settings)


def _ramp(n: int) -> list[str]:
    """``n`` colours from light (oldest) to dark (newest)."""
    if n == 1:
        return [VIRIDIS[-1]]
    return [VIRIDIS[round(i * (len(VIRIDIS) - 1) / (n - 1))] for i in range(n)]
