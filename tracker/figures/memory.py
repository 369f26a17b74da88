"""Measured bytes per parameter against model size, one line per variant."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from tracker.analysis.study_looks import study_styles
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
    scaling = _ScalingProbes.of(probes, prefix)
    if not scaling.ok.any():
        what = "no successful" if scaling.ok.size else "no"
        return empty_figure(title, HEIGHT, f"{what} {plot_text(prefix)}* memory probes in this job")

    sizes = scaling.sizes[scaling.ok]
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
        data=_variant_lines(scaling, exp),
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


@dataclass(frozen=True)
class _ScalingProbes:
    """The scaling models' probes as plain columns, read out of the frame once: a polars
    operation per variant would cost more than the whole figure."""

    models: list[str]
    variants: list[str]
    sizes: np.ndarray  # millions of parameters, NaN for a failed probe
    bpp: np.ndarray  # bpp_params_state_grads
    ok: np.ndarray  # bool: the probe succeeded

    @classmethod
    def of(cls, probes: pl.DataFrame, prefix: str) -> _ScalingProbes:
        rows = np.flatnonzero(probes.get_column("model").str.starts_with(prefix).to_numpy())
        if not rows.size:  # nothing to draw, whatever other columns the frame has
            return cls([], [], np.empty(0), np.empty(0), np.empty(0, dtype=bool))
        n_params = probes.get_column("n_params")
        models = probes.get_column("model").to_list()
        variants = probes.get_column("variant").to_list()
        return cls(
            models=[models[row] for row in rows],
            variants=[variants[row] for row in rows],
            sizes=n_params.cast(pl.Float64).to_numpy()[rows] / 1e6,
            bpp=probes.get_column("bpp_params_state_grads").to_numpy()[rows],
            ok=n_params.is_not_null().to_numpy()[rows],
        )


def _variant_lines(scaling: _ScalingProbes, exp: Expectations) -> list[dict[str, Any]]:
    """One line per variant through its successful probes, by model size (in the probes'
    order between equal sizes); the expectations' variants first, in their order."""
    ok = np.flatnonzero(scaling.ok)
    present = list(dict.fromkeys(scaling.variants[row] for row in ok))
    order = [v for v in exp.memory.expected_bpp if v in present]
    order += [v for v in present if v not in order]
    rows_of: dict[str, list[int]] = {variant: [] for variant in present}
    for row in ok[np.argsort(scaling.sizes[ok], kind="stable")].tolist():
        rows_of[scaling.variants[row]].append(row)
    palette = Palette()
    traces = []
    for variant in order:
        rows = np.array(rows_of[variant], dtype=np.int64)
        traces.append(
            scatter(
                x=scaling.sizes[rows],
                y=scaling.bpp[rows],
                text=[plot_text(scaling.models[row]) for row in rows],
                mode="lines+markers",
                name=plot_text(variant),
                line=dict(color=palette(variant), width=2),
                marker=dict(size=8),
                hovertemplate="%{text}: %{x:.1f}M params, %{y:.3f} B/param",
            )
        )
    return traces


def _failed_probes_note(scaling: _ScalingProbes) -> dict[str, Any] | None:
    """The footnote naming the failed probes (not drawn), None when none failed."""
    failed = np.flatnonzero(~scaling.ok).tolist()
    if not failed:
        return None
    names = [
        f"{plot_text(scaling.models[row])}/{plot_text(scaling.variants[row])}" for row in failed
    ]
    plural = "s" if len(names) > 1 else ""
    return footnote(f"not drawn: {len(names)} failed probe{plural} ({short_list(names)})")
