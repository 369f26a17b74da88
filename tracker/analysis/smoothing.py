"""Smoothing and alignment of loss curves."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import numpy as np
import polars as pl


def ema(values: pl.Series, alpha: float) -> pl.Series:
    """Exponential moving average m[0] = x[0], m[t] = (1 - alpha) * m[t-1] + alpha * x[t].

    The recurrence is sequential; ``alpha * x`` is computed vectorised and the scan runs in
    ``itertools.accumulate``'s C loop. Evaluating the same expression in the same order keeps
    the result bit-identical to the study's original script (polars' ``ewm_mean`` rounds
    differently in the last bits). A NaN poisons every later value, as in the original.
    """
    if values.len() == 0:
        return values.cast(pl.Float64)
    decay = 1 - alpha
    scaled = (values * alpha).to_list()
    scaled[0] = values[0]
    smoothed = accumulate(scaled, lambda mean, step: decay * mean + step)
    return pl.Series(values.name, list(smoothed), dtype=pl.Float64)


# Within one block the weights exp(RATE * (step - first step)) stay below exp(BLOCK_EXP): no
# overflow, and the rounding of the exponent (about BLOCK_EXP ulps) stays far below 1e-12.
BLOCK_EXP = 40.0


def smooth(steps: np.ndarray, values: np.ndarray, alpha: float) -> np.ndarray:
    """The smoothing that real curves need: an EMA per *step*, skipping non-finite values,
    debiased at the start (as TensorBoard and W&B smooth).

    With ``decay = (1 - alpha) ** (step - previous finite step)``, each finite value updates
    ``mean = decay * mean + (1 - decay) * x`` and ``weight = decay * weight + (1 - decay)``
    and is smoothed to ``mean / weight``: the first finite value is itself, a curve logged
    every 125 steps smooths like the same curve logged every step, and a non-finite value
    is NaN in the result (a gap) without touching the state, so smoothing resumes after it.
    The seed-parity numbers keep the study script's formula (``ema``).

    Computed in closed form, block by block, equal to that loop within 1e-12 relative (of the
    largest |value| when the values change sign and the mean nears 0):
    ``weight`` telescopes to ``1 - (1 - alpha) ** (step - first step + 1)``, and ``mean``
    within a block is a cumulative sum of exponentially re-weighted terms plus the decayed
    mean carried in from the block before.
    """
    return smooth_on(steps, values, alpha, None)[0]


@dataclass(frozen=True)
class EmaState:
    """Where ``smooth`` stands after some points: the first finite step (the debiasing
    counts from it), the last finite step and its mean."""

    first: float
    at: float
    mean: float


def smooth_on(
    steps: np.ndarray, values: np.ndarray, alpha: float, state: EmaState | None
) -> tuple[np.ndarray, EmaState | None]:
    """``smooth`` of the points that follow those ``state`` was left at (None: the first),
    and the state after them: a curve smoothed piece by piece, each piece given the state
    the one before left, equals ``smooth`` of the whole within its 1e-12."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    steps = np.asarray(steps, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(values))
    if finite.size == 0:
        return out, state
    at, x = steps[finite], values[finite]
    first = float(at[0]) if state is None else state.first
    if alpha >= 1.0:  # no memory: each value is its own mean
        out[finite] = values[finite]
        return out, EmaState(first, float(at[-1]), float(x[-1]))
    rate = -np.log1p(-alpha)  # (1 - alpha) ** gap == exp(-rate * gap)
    before = at[0] - 1.0 if state is None else state.at
    gain = -np.expm1(-rate * np.diff(at, prepend=before))
    term = gain * x
    # larger values get shorter blocks, so that term * exp(BLOCK_EXP) cannot overflow
    limit = min(BLOCK_EXP, max(1.0, 600.0 - np.log(max(1.0, float(np.max(np.abs(x)))))))
    mean = np.empty_like(x)
    carried, carried_at = (0.0, float(at[0])) if state is None else (state.mean, state.at)
    start = 0
    while start < x.size:
        end = max(start + 1, int(np.searchsorted(at, at[start] + limit / rate, side="right")))
        since = at[start:end] - at[start]
        block = np.cumsum(term[start:end] * np.exp(rate * since)) * np.exp(-rate * since)
        mean[start:end] = block + carried * np.exp(-rate * (at[start:end] - carried_at))
        carried, carried_at, start = mean[end - 1], at[end - 1], end
    out[finite] = mean / -np.expm1(-rate * (at - first + 1.0))
    return out, EmaState(first, float(at[-1]), float(mean[-1]))


def smooth_points(values: np.ndarray, alpha: float) -> np.ndarray:
    """TensorBoard's smoothing: the debiased EMA per *point*, not per step.

    Each finite value updates ``last = (1 - alpha) * last + alpha * x`` and is smoothed to
    ``last / (1 - (1 - alpha) ** n)``, n the finite values so far; a non-finite value is NaN
    in the result and leaves the state alone. A curve logged every 125 steps is then smoothed
    125 times harder than per step (``smooth``): what TensorBoard draws for the same weight.
    It is ``smooth`` over the finite values' ranks, whose gaps are all one.
    """
    values = np.asarray(values, dtype=np.float64)
    return smooth(np.cumsum(np.isfinite(values)), values, alpha)


class Smoother:
    """``smooth`` (with ``by_point``: ``smooth_points``) of a curve given piece by piece in
    step order, so that a long curve is smoothed without ever being whole in memory."""

    def __init__(self, alpha: float, by_point: bool) -> None:
        self.alpha = alpha
        self.by_point = by_point
        self.state: EmaState | None = None
        self.ranks = 0  # finite values so far: the "steps" of smoothing per point

    def __call__(self, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
        at = steps
        if self.by_point:
            at = self.ranks + np.cumsum(np.isfinite(values))
            self.ranks = int(at[-1]) if at.size else self.ranks
        out, self.state = smooth_on(at, values, self.alpha, self.state)
        return out


# An EMA per step keeps (1 - alpha) ** gap of the mean before a point logged `gap` steps
# after the one before: below a tenth it only redraws the points (a curve logged every 250
# steps at alpha 0.02 keeps 0.6%), and a figure draws that curve as logged, not as an EMA.
KEPT_AT_LEAST = 0.1


def ema_smooths(steps: np.ndarray, alpha: float) -> bool:
    """Whether ``smooth`` smooths a curve logged at ``steps``: at the median gap between its
    steps a point keeps at least ``KEPT_AT_LEAST`` of the mean before it."""
    if steps.size < 2:
        return True
    gap = float(np.median(np.diff(steps)))
    return bool((1 - alpha) ** gap >= KEPT_AT_LEAST)
