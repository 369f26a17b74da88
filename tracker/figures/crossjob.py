"""Figures across jobs that stay readable from two jobs to thousands (the training loss
across jobs: ``tracker.figures.armloss``).

Per-variant figures (bytes/param, validation loss) put each job at its time (``time``
metadata, else ingest time) on a date axis: one line per variant, hover naming the job, so
a thousand jobs are a thousand points of a trend, not a thousand tick labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

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
from tracker.figures.timeline import (
    MARKS_UP_TO,
    Job,
    job_times,
    per_job_marks,
    reference_line,
    spread_band,
    time_axis,
)

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

BPP_HEIGHT = 460
VAL_HEIGHT = 420
NOTE_WIDTH = 104  # characters of a footnote line in a full-width figure
FAIL_COLOR = "#c62828"


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


def choose_model(stats: pl.DataFrame, jobs: int, prefix: str) -> ModelChoice:
    """The largest ``prefix`` model measured for every variant probed, in every job with probes.

    The figure compares one model across jobs, so it needs that model everywhere. When no
    model is complete, the one with the most successful probes (then the largest) is used.
    ``stats``: per ``prefix`` model (in the order of their first probe), its ``size`` (most
    parameters), probes ``measured`` and ``failed``, and ``jobs`` measured in; ``jobs``: the
    jobs with a probe of a ``prefix`` model.
    """
    if stats.is_empty():
        return ModelChoice(None, f"no {prefix}* memory probes in these jobs")
    stats = stats.filter(pl.col("measured") > 0)
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
) -> Figure:
    """Measured params+state+grads bytes/param of one model per variant, over job time.

    ``probes`` is ``tracker.queries.tables.probes``; one line per variant (expectations'
    order first), the analytic total of each variant as a dotted line of its colour, and a
    red ring on every value more than the tolerance away from it. Failed probes are not
    drawn and are counted under the plot.
    """
    title = "Bytes/param (params+optimizer+grads) across jobs" + (
        f": {plot_text(choice.model)}" if choice.model else ""
    )
    if choice.model is None:
        return empty_figure(title, BPP_HEIGHT, plot_text(choice.why))
    rows = probes.filter(pl.col("model") == choice.model)
    ok = rows.filter(pl.col("n_params").is_not_null())
    order = {job.name: i for i, job in enumerate(jobs)}
    times = job_times(jobs)
    palette = Palette()
    traces: list[dict[str, Any]] = []
    off: list[tuple[int, float, str]] = []  # values off their analytic total: job, value, label
    references: list[tuple[dict[str, Any], dict[str, Any]]] = []
    present = ok.get_column("variant").unique(maintain_order=True).to_list()
    for variant in variant_order(present, exp):
        values = dict(
            ok.filter(pl.col("variant") == variant)
            .select("job", "bpp_params_state_grads")
            .iter_rows()
        )
        found = sorted((order[job], value) for job, value in values.items() if job in order)
        name = plot_text(variant)
        color = palette(variant)
        total = analytic_total(exp, variant)
        traces.append(_bpp_line(found, jobs, times, name, color))
        if total is not None:
            references.append(reference_line(total, color, f"{total:g}"))
            tolerance = exp.memory.bpp_tolerance
            off += [
                (i, value, f"{plot_text(jobs[i].name)}: {name}")
                for i, value in found
                if abs(value - total) > tolerance
            ]
    if off:
        traces.append(_off_total_rings(off, times, exp.memory.bpp_tolerance))
    notes = wrap_lines(_bpp_notes(rows, exp, choice), NOTE_WIDTH)
    yaxis = axis(title=dict(text="measured bytes / parameter"), rangemode="tozero")
    return _over_time(title, BPP_HEIGHT, traces, yaxis, references, notes)


def _over_time(
    title: str,
    height: int,
    traces: list[dict[str, Any]],
    yaxis: dict[str, Any],
    references: Sequence[tuple[dict[str, Any], dict[str, Any]]],
    notes: list[str],
) -> dict[str, Any]:
    """A cross-job figure against the jobs' times: ``references`` as (line, label) pairs, the
    notes under the plot, the bottom margin made room for them."""
    return figure(
        data=traces,
        layout=layout(
            title,
            height,
            margin=dict(l=70, r=60, t=100, b=max(120, 66 + 14 * len(notes))),
            hovermode="closest",
            xaxis=time_axis(),
            yaxis=yaxis,
            shapes=[shape for shape, _ in references],
            annotations=[label for _, label in references] + [footnote_lines(notes, -52)],
        ),
    )


def _bpp_line(
    found: Sequence[tuple[int, float]],
    jobs: Sequence[Job],
    times: np.ndarray,
    name: str,
    color: str,
) -> dict[str, Any]:
    """One variant's bytes/param line through ``found`` (job position, value)."""
    positions = [i for i, _ in found]
    return scatter(
        x=times[positions],
        y=[value for _, value in found],
        text=[plot_text(jobs[i].name) for i in positions],
        name=name,
        legendgroup=name,
        line=dict(color=color, width=1.5),
        hovertemplate=f"%{{text}}: {name} %{{y:.3f}} B/param<extra></extra>",
        **per_job_marks(len(found), color),
    )


def _off_total_rings(
    off: Sequence[tuple[int, float, str]], times: np.ndarray, tolerance: float
) -> dict[str, Any]:
    """A red ring on each value (job position, value, label) off its analytic total."""
    return scatter(
        x=times[[i for i, _, _ in off]],
        y=[value for _, value, _ in off],
        text=[label for _, _, label in off],
        mode="markers",
        name=f"off the analytic by > {tolerance:g}",
        marker=dict(size=13, color="rgba(0,0,0,0)", line=dict(color=FAIL_COLOR, width=2)),
        hovertemplate="%{text} %{y:.3f} B/param, off its analytic total<extra></extra>",
    )


def _bpp_notes(rows: pl.DataFrame, exp: Expectations, choice: ModelChoice) -> list[str]:
    """The footnotes: why this model, what the dotted lines and rings mean, what failed."""
    assert choice.model is not None
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
    return notes


def val_loss_across_jobs(runs: pl.DataFrame, jobs: Sequence[Job], exp: Expectations) -> Figure:
    """Validation loss per variant over job time: mean over seeds, the std as an error bar.

    ``runs`` is ``tracker.queries.tables.seeds(...)``. One trace per
    variant (per model and variant when several models trained); the paper's value of a
    variant, when the expectations have one, is a dotted line of its colour.
    """
    title = "Validation loss across jobs (mean \u00b1 std over seeds)"
    with_val = runs.filter(pl.col("val_loss_mean").is_not_null())
    if with_val.is_empty():
        what = "no training arm has" if runs.height else "no training arms in these jobs, no"
        return empty_figure(title, VAL_HEIGHT, f"{what} validation loss")
    models = with_val.get_column("model").unique(maintain_order=True).to_list()
    order = {job.name: i for i, job in enumerate(jobs)}
    times = job_times(jobs)
    palette = Palette()
    traces: list[dict[str, Any]] = []
    references: list[tuple[dict[str, Any], dict[str, Any]]] = []
    referenced: set[str] = set()
    span: list[float] = []  # every drawn value, and the paper's
    banded = False  # a line past MARKS_UP_TO jobs: its spread is a band, not error bars
    for model, variant in _val_series(with_val, models, exp):
        part = with_val.filter((pl.col("model") == model) & (pl.col("variant") == variant))
        found = sorted(
            ((order[row["job"]], row) for row in part.iter_rows(named=True) if row["job"] in order),
            key=lambda item: item[0],
        )
        name = plot_text(f"{variant} ({model})" if len(models) > 1 else variant)
        color = palette(variant)
        means = [row["val_loss_mean"] for _, row in found]
        std = [row["val_loss_std"] or 0.0 for _, row in found]
        traces += _val_line(found, means, std, jobs, times, name, color)
        banded = banded or len(found) > MARKS_UP_TO
        paper = exp.training.val_loss.paper(variant)
        if paper is not None and variant not in referenced:
            referenced.add(variant)
            references.append(reference_line(paper, color, f"{paper:g}"))
            span.append(paper)
        for mean, spread in zip(means, std, strict=True):
            span += [mean - spread, mean + spread]
    notes = wrap_lines(_val_notes(runs, banded), NOTE_WIDTH)
    yaxis = axis(title=dict(text="validation loss"), tickformat=".3f", range=_padded(span))
    return _over_time(title, VAL_HEIGHT, traces, yaxis, references, notes)


def _val_series(
    with_val: pl.DataFrame, models: list[str], exp: Expectations
) -> list[tuple[str, str]]:
    """The (model, variant) lines to draw: expectations' variant order, then model order."""
    series = with_val.select("model", "variant").unique(maintain_order=True).rows()
    variants = variant_order([v for _, v in series], exp)
    series.sort(key=lambda mv: (variants.index(mv[1]), models.index(mv[0])))
    return series


def _val_line(
    found: Sequence[tuple[int, dict[str, Any]]],
    means: list[float],
    std: list[float],
    jobs: Sequence[Job],
    times: np.ndarray,
    name: str,
    color: str,
) -> list[dict[str, Any]]:
    """One line's traces through ``found`` (job position, row): its spread as error bars,
    or as a band under it past ``MARKS_UP_TO`` jobs, then the line."""
    traces = []
    x = times[[i for i, _ in found]]
    marks = per_job_marks(len(found), color)
    if len(found) <= MARKS_UP_TO:
        marks["error_y"] = dict(
            type="data", array=std, visible=True, color=color, thickness=1, width=3
        )
    else:
        traces.append(spread_band(x, means, std, color, name))
    traces.append(
        scatter(
            x=x,
            y=means,
            text=[plot_text(jobs[i].name) for i, _ in found],
            customdata=[[f"{s:.4f}", row["seeds"]] for s, (_, row) in zip(std, found, strict=True)],
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
    return traces


def _val_notes(runs: pl.DataFrame, banded: bool) -> list[str]:
    """The footnotes: what the error bars and dotted lines are, and who has no validation
    loss (diverged or none)."""
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
    return notes


def _padded(span: Sequence[float]) -> list[float]:
    """The y range: every value in ``span`` with 8% of its extent (at least 0.001) around."""
    low, high = min(span), max(span)
    pad = max(0.08 * (high - low), 0.001)
    return [low - pad, high + pad]
