"""Training arms: the study script's ``gpt_analysis.json`` and the training verdicts.

The arms play roles set in the expectations (``[training]``): a baseline (AdamW), a
candidate that should track it (FlashAdamW, same seed), a seed twin of the baseline (the
noise floor of that tracking) and a divergent ablation.

The script's numbers keep its ``ema``; the tracking verdict and its numbers use ``smooth``
(``tracker.analysis.tracking``). Curves are aligned on the steps they have in common (inner
join on ``step``), each EMA being computed on its arm's FULL series first; the EMA is causal,
so on the script's data (identical step columns) this equals the script's truncation to the
shortest curve. Means of |delta|
are sequential sums (``cum_sum``), bit-identical to the script's Python ``sum``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from tracker.analysis.expectations import Expectations
from tracker.analysis.outcomes import divergence_verdicts, stopped_in, val_loss_verdicts
from tracker.analysis.smoothing import ema
from tracker.analysis.tracking import CHECK, tracking_check
from tracker.analysis.verdict import NA, Verdict

__all__ = ["analyze_training"]

# The script's keys; they name the roles' default arms whatever arms the roles are given.
DELTA_KEY = "flash_vs_ref_mean_abs_ema_delta_2nd_half"
NOISE_KEY = "seed_noise_mean_abs_ema_delta_2nd_half"
DIVERGED_KEY = "linear_diverged"
FINAL_LOSS_KEY = "linear_final_loss"
# The tracking check's numbers (``smooth``, not the script's ``ema``), kept for claims and the gate.
TRACKING_NUMBERS = ("ema_delta", "seed_noise")

RUN_SCHEMA: dict[str, Any] = {
    "arm": pl.String,
    "variant": pl.String,
    "val_loss": pl.Float64,
    "final_loss": pl.Float64,
    "diverged": pl.Boolean,
}
EMPTY_CURVE = pl.DataFrame(schema={"step": pl.Int64, "value": pl.Float64})


@dataclass
class TrainingResult:
    gpt: dict[str, Any]
    verdicts: list[Verdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tracking: dict[str, float | None] = field(default_factory=dict)  # TRACKING_NUMBERS


@dataclass(frozen=True)
class _Delta:
    """Mean |EMA(a) - EMA(b)| over the second half of ``steps`` aligned steps."""

    value: float | None  # None: no common step
    steps: int
    first: int | None  # first step of the second half
    last: int | None


def _nan_to_none(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def _runs(runs: pl.DataFrame) -> dict[str, dict[str, Any]]:
    missing = [
        pl.lit(None, dtype).alias(name)
        for name, dtype in RUN_SCHEMA.items()
        if name not in runs.columns
    ]
    frame = runs.with_columns(missing).select(
        pl.col(name).cast(dtype) for name, dtype in RUN_SCHEMA.items()
    )
    rows = {row["arm"]: row for row in frame.iter_rows(named=True)}
    extras = runs["extra"].to_list() if "extra" in runs.columns else [None] * len(rows)
    for row, extra in zip(rows.values(), extras, strict=True):
        row["extra"] = extra if isinstance(extra, dict) else None  # the summary's other keys
    return rows


def _smoothed(
    curves: Mapping[str, pl.DataFrame], arm: str, alpha: float, name: str
) -> pl.DataFrame:
    """``step`` and the script's EMA of the arm's full loss series as column ``name``."""
    curve = curves.get(arm)
    if curve is None or "step" not in curve.columns or "value" not in curve.columns:
        curve = EMPTY_CURVE
    values = ema(curve["value"].cast(pl.Float64), alpha)
    return pl.DataFrame(
        {"step": curve["step"].cast(pl.Int64), name: values},
        schema={"step": pl.Int64, name: pl.Float64},
    )


def _align(*frames: pl.DataFrame) -> pl.DataFrame:
    """Rows of the steps every frame has, in step order."""
    aligned = frames[0]
    for frame in frames[1:]:
        aligned = aligned.join(frame, on="step", how="inner", maintain_order="left")
    return aligned.sort("step", maintain_order=True)


def _mean_abs_delta(aligned: pl.DataFrame, a: str, b: str) -> _Delta:
    """The script's ``sum(abs(x - y) for the 2nd half) / (n - n // 2)``, summed in order."""
    n = aligned.height
    if n == 0:
        return _Delta(None, 0, None, None)
    half = aligned.slice(n // 2)
    total = half.select((pl.col(a) - pl.col(b)).abs().cum_sum().last()).item()
    return _Delta(total / (n - n // 2), n, half["step"][0], half["step"][-1])


def _tracking(
    curves: Mapping[str, pl.DataFrame],
    exp: Expectations,
    present: dict[str, Any],
    smoothed: Mapping[str, np.ndarray],
) -> tuple[Verdict, dict[str, float | None], list[str]]:
    """The tracking verdict (``tracker.analysis.tracking``), its numbers and its notes."""
    t = exp.training
    for arm in (t.baseline, t.candidate):
        if arm not in present:
            detail = f"arm {arm} missing: candidate-vs-baseline comparison not possible"
            verdict = Verdict(CHECK, t.candidate, None, None, None, NA, detail)
            return verdict, dict.fromkeys(TRACKING_NUMBERS), []
    result = tracking_check(curves, exp, t.seed_twin in present, smoothed)
    numbers = dict(zip(TRACKING_NUMBERS, (result.ema_delta, result.seed_noise), strict=True))
    return result.verdict, numbers, result.notes


def analyze_training(
    runs: pl.DataFrame,
    curves: dict[str, pl.DataFrame],
    exp: Expectations,
    smoothed: Mapping[str, np.ndarray] | None = None,
) -> TrainingResult:
    """The script's metrics (its ``ema``), the training verdicts (the tracking check on
    ``smooth``), the tracking numbers and notes on what could not be checked.

    ``smoothed``: arm -> ``smooth`` (``exp.training.ema_alpha``) of its loss, when the caller
    has computed it already (the figures draw it too); computed here otherwise.
    """
    present = _runs(runs)
    if not present:
        return TrainingResult({}, [], ["no training arms: training analysis skipped"])
    if not exp.judges("training"):  # its claims judge the runs across jobs
        return TrainingResult({}, [], [], dict.fromkeys(TRACKING_NUMBERS))
    t = exp.training
    base, cand, twin, div = t.baseline, t.candidate, t.seed_twin, t.divergent
    notes = []
    for arm, consequence in (
        (base, "candidate-vs-baseline comparison not possible"),
        (cand, "candidate-vs-baseline comparison not possible"),
        (twin, "seed-noise check not possible"),
        (div, "divergence check not possible"),
    ):
        if arm not in present:
            notes.append(f"arm {arm} missing: {consequence}")
    notes = list(dict.fromkeys(notes))
    notes += [
        f"{arm}: {c.message}; its final numbers are left out of the verdicts"
        for arm, c in stopped_in(present, curves).items()
    ]

    gpt: dict[str, Any] = {}
    if base in present and cand in present:
        b = _smoothed(curves, base, t.ema_alpha, "b")
        pair = _align(b, _smoothed(curves, cand, t.ema_alpha, "c"))
        delta = _mean_abs_delta(pair, "b", "c")
        if delta.value is None:
            notes.append(f"arms {base} and {cand} have no step in common: no EMA comparison")
        gpt[DELTA_KEY] = _nan_to_none(delta.value)
        roles = dict.fromkeys((base, cand, twin, div))
        gpt["final_val_loss"] = {
            arm: _nan_to_none(present[arm]["val_loss"]) for arm in roles if arm in present
        }
        if twin in present:
            # the script's window: the first min(n, len(twin)) points, i.e. the steps the
            # three arms have in common
            triple = _align(pair, _smoothed(curves, twin, t.ema_alpha, "t"))
            noise = _mean_abs_delta(triple, "b", "t")
            if noise.value is None and delta.value is not None:
                notes.append(f"arm {twin} has no step in common with {base} and {cand}")
            gpt[NOISE_KEY] = _nan_to_none(noise.value)
        if div in present:
            gpt[DIVERGED_KEY] = bool(present[div]["diverged"])
            gpt[FINAL_LOSS_KEY] = _nan_to_none(present[div]["final_loss"])
    tracked, numbers, tracking_notes = _tracking(curves, exp, present, smoothed or {})
    verdicts = [
        tracked,
        *divergence_verdicts(exp, present, curves),
        *val_loss_verdicts(exp, present, curves),
    ]
    return TrainingResult(gpt, verdicts, notes + tracking_notes, numbers)
