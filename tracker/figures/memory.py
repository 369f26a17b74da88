"""Measured bytes per parameter against model size, one line per variant."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import polars as pl

from tracker.analysis.expectations import study_styles
from tracker.figures.style import (
    Figure,
    Palette,
    axis,
    empty_figure,
    figure,
    footnote,
    hline,
    layout,
    plot_text,
    scatter,
    short_list,
)

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

HEIGHT = 480


def paper_lines(exp: Expectations) -> list[tuple[float, str]]:
    """(bytes/param, label) of the analytic totals of the variants whose look has a
    ``paper_line`` (the study files' ``[style]``), in their order."""
    lines = []
    looks = study_styles().variants.items()
    for variant, label in ((v, look.paper_line) for v, look in looks if look.paper_line):
        bpp = exp.memory.expected_bpp.get(variant)
        if bpp is None or bpp.params is None or bpp.state is None or bpp.grads is None:
            continue
        total = bpp.params + bpp.state + bpp.grads
        lines.append((total, label.format(total=f"{total:g}")))
    return lines


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-3-5 ticks around [low, high]: labels for a log axis spanning one or two decades."""
    ticks = []
    for decade in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1):
        for mantissa in (1, 2, 3, 5):
            value = mantissa * 10.0**decade
            if low / 1.6 <= value <= high * 1.6:
                ticks.append(value)
    return ticks


def memory_scaling(probes: pl.DataFrame, exp: Expectations, *, gpu: str | None = None) -> Figure:
    """The study's ``mem_scaling`` figure: params+optimizer+grads bytes/param vs model size.

    Successful probes of the scaling models (``exp.memory.scaling_model_prefix``), one
    line per variant (the expectations' variants first, in their order), log-scaled model
    size, dotted lines at the paper's totals. Failed probes are listed under the plot. A
    figure without traces says why.
    """
    prefix = exp.memory.scaling_model_prefix
    where = f" ({plot_text(gpu)}, one variant per process)" if gpu else " (one variant per process)"
    title = f"Measured CUDA bytes/param vs model size{where}"
    scaling = probes.filter(pl.col("model").str.starts_with(prefix))
    ok = scaling.filter(pl.col("n_params").is_not_null())
    if ok.is_empty():
        what = "no successful" if not scaling.is_empty() else "no"
        return empty_figure(title, HEIGHT, f"{what} {plot_text(prefix)}* memory probes in this job")

    sizes = ok.get_column("n_params").cast(pl.Float64).to_numpy() / 1e6
    ticks = log_ticks(float(sizes.min()), float(sizes.max()))
    shapes, notes = [], []
    for y, label in paper_lines(exp):
        shape, text = hline(y, plot_text(label))
        shapes.append(shape)
        notes.append(text)
    extra: dict[str, Any] = {}
    failed = _failed_probes_note(scaling)
    if failed is not None:
        notes.append(failed)
        extra["margin"] = dict(l=70, r=30, t=100, b=95)
    return figure(
        data=_variant_lines(ok, exp),
        layout=layout(
            title,
            HEIGHT,
            xaxis=axis(
                type="log",
                title=dict(text="model parameters (millions)"),
                tickvals=ticks,
                ticktext=[f"{t:g}" for t in ticks],
            ),
            yaxis=axis(
                title=dict(text="measured bytes / parameter (params+optimizer+grads)"),
                rangemode="tozero",
            ),
            shapes=shapes,
            annotations=notes,
            **extra,
        ),
    )


def _variant_lines(ok: pl.DataFrame, exp: Expectations) -> list[dict[str, Any]]:
    """One line per variant through its successful probes ``ok``, by model size; the
    expectations' variants first, in their order."""
    present = ok.get_column("variant").unique(maintain_order=True).to_list()
    order = [v for v in exp.memory.expected_bpp if v in present]
    order += [v for v in present if v not in order]
    palette = Palette()
    traces = []
    by_variant = {key[0]: rows for key, rows in ok.partition_by("variant", as_dict=True).items()}
    for variant in order:
        rows = by_variant[variant].sort("n_params", maintain_order=True)
        traces.append(
            scatter(
                x=rows.get_column("n_params").cast(pl.Float64).to_numpy() / 1e6,
                y=rows.get_column("bpp_params_state_grads").to_numpy(),
                text=[plot_text(m) for m in rows.get_column("model").to_list()],
                mode="lines+markers",
                name=plot_text(variant),
                line=dict(color=palette(variant), width=2),
                marker=dict(size=8),
                hovertemplate="%{text}: %{x:.1f}M params, %{y:.3f} B/param",
            )
        )
    return traces


def _failed_probes_note(scaling: pl.DataFrame) -> dict[str, Any] | None:
    """The footnote naming the failed probes (not drawn), None when none failed."""
    failed = scaling.filter(pl.col("n_params").is_null())
    if failed.is_empty():
        return None
    names = [
        f"{plot_text(m)}/{plot_text(v)}" for m, v in failed.select("model", "variant").iter_rows()
    ]
    plural = "s" if len(names) > 1 else ""
    return footnote(f"not drawn: {len(names)} failed probe{plural} ({short_list(names)})")
