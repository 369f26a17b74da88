"""A job's scaling-model probes by size, and the fixed overhead fitted over those sizes.

A job has a few dozen probes: they are grouped here as Python rows, since a frame operation
per variant costs more than the numbers themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from tracker.analysis.expectations import COMPONENTS

Row = dict[str, Any]


def scaling_by_size(ok: pl.DataFrame) -> dict[str, list[Row]]:
    """Per variant (in order of first appearance), its scaling-model probes sorted by size;
    ties keep file order (as Python's stable sort)."""
    groups: dict[str, list[Row]] = {}
    for row in (
        ok.filter(pl.col("scaling")).sort("n_params", maintain_order=True).iter_rows(named=True)
    ):
        groups.setdefault(row["variant"], []).append(row)
    return groups


def fixed_overheads(by_size: dict[str, list[Row]]) -> dict[tuple[str, str], Overhead]:
    """Per (variant, component): bytes/param fitted against 1/parameters over the job's
    scaling-model sizes (least squares, ``line_fit``), bpp = asymptote + overhead_bytes / n.

    A fixed allocation (allocator blocks, workspace buffers) costs overhead_bytes / n per
    parameter: large on small models, vanishing on large ones, so the analytic value is the
    asymptote. A negative slope is no overhead (0). Variants with fewer than two sizes: none.
    """
    fits = {}
    for variant, rows in by_size.items():
        sizes = [row["n_params"] for row in rows]
        if len(set(sizes)) < 2:
            continue
        inverse = 1.0 / np.array(sizes, dtype=np.float64)
        for component in COMPONENTS:
            values = [row[f"bpp_{component}"] for row in rows]
            if any(value is None or not math.isfinite(value) for value in values):
                continue
            slope, intercept = line_fit(inverse, np.array(values, dtype=np.float64))
            fits[str(variant), component] = Overhead(max(0.0, slope), intercept, len(rows))
    return fits


def line_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope and intercept of ``y`` against ``x`` (at least two distinct x).

    The operations of ``scipy.stats.linregress``, so the results agree to the bit, without
    importing scipy.stats (0.5 s and more: it would dominate a one-job report).
    """
    ssxm, ssxym, _, _ = np.cov(x, y, bias=True).flat
    slope = ssxym / ssxm
    return float(slope), float(np.mean(y) - slope * np.mean(x))


@dataclass(frozen=True)
class Overhead:
    bytes: float  # fitted fixed bytes of one component, >= 0
    asymptote: float  # fitted bytes/param of an infinitely large model
    sizes: int  # model sizes the fit used
