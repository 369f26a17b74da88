"""The tracking check ``ema_delta_vs_seed_noise``: does the candidate's smoothed loss stay as
close to the baseline's as the baseline's seed twin does?

Every arm is smoothed with ``smooth`` (per step, skipping non-finite values, debiased), not
with the study script's ``ema``: the script's numbers in ``gpt_analysis.json`` keep its formula
(``tracker.analysis.training``), while this verdict and the numbers kept for claims and the
gate (``ema_delta``, ``seed_noise``) use this one. The rule: curves are aligned on the steps
they have in common; the delta is the mean |smooth(a) - smooth(b)| over the second half of
those steps (by count, as the script), at the steps of that half where both smoothed curves
are finite. A short NaN streak is thus skipped (and counted in the detail), while a run whose
last loss is not finite (it never recovered) fails the check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from tracker.analysis.checks import Check
from tracker.analysis.expectations import Expectations
from tracker.analysis.smoothing import smooth
from tracker.analysis.verdict import FAIL, NA, PASS, Verdict

__all__ = ["CHECK", "TrackingResult", "non_finite_summary", "tracking_check"]

CHECK = Check.EMA_DELTA_VS_SEED_NOISE
MAX_RANGES = 6  # step ranges named in a detail before "and N more"


@dataclass(frozen=True)
class Delta:
    """Mean |smooth(a) - smooth(b)| over the finite steps of the 2nd half of the common steps."""

    value: float | None  # None: no such step
    first: int | None  # first and last step of the 2nd half
    last: int | None


@dataclass
class TrackingResult:
    verdict: Verdict
    ema_delta: float | None  # candidate vs baseline
    seed_noise: float | None  # seed twin vs baseline
    notes: list[str]


def _compact(steps: Sequence[int], positions: np.ndarray) -> str:
    """``800-899, 1200``: runs of consecutive logged points (``positions`` in the curve)."""
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    runs = [
        f"{steps[run[0]]}" if run.size == 1 else f"{steps[run[0]]}-{steps[run[-1]]}"
        for run in np.split(np.arange(len(steps)), breaks)
    ]
    more = len(runs) - MAX_RANGES
    return ", ".join(runs[:MAX_RANGES]) + (f" and {more} more" if more > 0 else "")


def non_finite_summary(arm: str, curve: pl.DataFrame) -> str | None:
    """``flash_s0: 100 non-finite losses at steps 800-899``, or None when all are finite."""
    values = curve.get_column("value").to_numpy()
    positions = np.flatnonzero(~np.isfinite(values))
    if positions.size == 0:
        return None
    steps = curve.get_column("step").to_numpy()[positions].tolist()
    plural = "loss" if positions.size == 1 else "losses"
    where = "step" if positions.size == 1 else "steps"
    return f"{arm}: {positions.size} non-finite {plural} at {where} {_compact(steps, positions)}"


def _curve(curves: Mapping[str, pl.DataFrame], arm: str) -> pl.DataFrame:
    """The arm's ``step`` and ``value`` (float, a null as NaN); empty when it has none."""
    curve = curves.get(arm)
    if curve is None or "step" not in curve.columns or "value" not in curve.columns:
        return pl.DataFrame(schema={"step": pl.Int64, "value": pl.Float64})
    value = pl.col("value").cast(pl.Float64).fill_null(float("nan"))
    return curve.select(pl.col("step").cast(pl.Int64), value)


def _ends_non_finite(curve: pl.DataFrame) -> bool:
    return curve.height > 0 and not math.isfinite(curve["value"][-1])


def _smoothed(
    curve: pl.DataFrame, alpha: float, name: str, smoothed: np.ndarray | None
) -> pl.DataFrame:
    steps = curve.get_column("step")
    if smoothed is None:
        smoothed = smooth(steps.to_numpy(), curve.get_column("value").to_numpy(), alpha)
    return pl.DataFrame(
        {"step": steps, name: smoothed}, schema={"step": pl.Int64, name: pl.Float64}
    )


def _delta(aligned: pl.DataFrame, a: str, b: str) -> Delta:
    n = aligned.height
    if n == 0:
        return Delta(None, None, None)
    half = aligned.slice(n // 2)
    diff = (half[a] - half[b]).abs().to_numpy()
    finite = diff[np.isfinite(diff)]
    value = float(np.mean(finite)) if finite.size else None
    return Delta(value, int(half["step"][0]), int(half["step"][-1]))


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.5f}"


def _judge(
    exp: Expectations, delta: Delta, noise: Delta | None, skipped: str, unfinished: list[str]
) -> Verdict:
    t = exp.training

    def verdict(status: str, detail: str, threshold: float | None = None) -> Verdict:
        return Verdict(CHECK, t.candidate, delta.value, threshold, None, status, detail + skipped)

    if delta.first is None:
        return verdict(NA, f"{t.candidate} and {t.baseline} have no step in common")
    if noise is None:
        return verdict(NA, f"arm {t.seed_twin} missing: seed-noise check not possible")
    if noise.first is None:
        return verdict(NA, f"{t.seed_twin} has no step in common with the others")
    if noise.value is None:
        return verdict(NA, f"seed-noise delta {t.seed_twin} vs {t.baseline} is not finite")
    threshold = noise.value * t.job_noise_factor
    detail = (
        f"mean |EMA delta| {t.candidate} vs {t.baseline} over steps {delta.first}-{delta.last}: "
        f"{_fmt(delta.value)}; limit {t.job_noise_factor:g} x seed noise ({t.seed_twin} vs "
        f"{t.baseline}, steps {noise.first}-{noise.last}: {_fmt(noise.value)}) = "
        f"{_fmt(threshold)}"
    )
    if delta.value is None:
        detail += "; no step of the 2nd half where both smoothed curves are finite"
    if unfinished:
        detail += f"; last loss not finite (never recovered): {', '.join(unfinished)}"
    passed = delta.value is not None and delta.value <= threshold and not unfinished
    return verdict(PASS if passed else FAIL, detail, threshold)


def tracking_check(
    curves: Mapping[str, pl.DataFrame],
    exp: Expectations,
    twin_present: bool,
    smoothed: Mapping[str, np.ndarray],
) -> TrackingResult:
    """The verdict, its two numbers and a note per arm with non-finite losses; baseline and
    candidate are present (``twin_present``: the seed twin too). ``smoothed``: arm ->
    ``smooth`` of its loss, when the caller has it."""
    t = exp.training
    roles = [t.baseline, t.candidate] + ([t.seed_twin] if twin_present else [])
    roles = list(dict.fromkeys(roles))
    frames = {arm: _curve(curves, arm) for arm in roles}
    notes = [n for arm in roles if (n := non_finite_summary(arm, frames[arm])) is not None]
    unfinished = [arm for arm in (t.baseline, t.candidate) if _ends_non_finite(frames[arm])]
    base = _smoothed(frames[t.baseline], t.ema_alpha, "b", smoothed.get(t.baseline))
    cand = _smoothed(frames[t.candidate], t.ema_alpha, "c", smoothed.get(t.candidate))
    pair = base.join(cand, on="step", how="inner", maintain_order="left").sort("step")
    delta, noise = _delta(pair, "b", "c"), None
    if twin_present:
        twin = _smoothed(frames[t.seed_twin], t.ema_alpha, "t", smoothed.get(t.seed_twin))
        triple = pair.join(twin, on="step", how="inner", maintain_order="left").sort("step")
        noise = _delta(triple, "b", "t")
    skipped = "".join(f"; {note}, skipped" for note in notes)
    verdict = _judge(exp, delta, noise, skipped, unfinished)
    return TrackingResult(verdict, delta.value, None if noise is None else noise.value, notes)
