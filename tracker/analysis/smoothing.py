"""Smoothing and alignment of loss curves."""

from __future__ import annotations

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


def smooth(steps: np.ndarray, values: np.ndarray, alpha: float) -> np.ndarray:
    """The smoothing that real curves need: an EMA per *step*, skipping non-finite values,
    debiased at the start (as TensorBoard and W&B smooth).

    With ``decay = (1 - alpha) ** (step - previous finite step)``, each finite value updates
    ``mean = decay * mean + (1 - decay) * x`` and ``weight = decay * weight + (1 - decay)``
    and is smoothed to ``mean / weight``: the first finite value is itself, a curve logged
    every 125 steps smooths like the same curve logged every step, and a non-finite value
    is NaN in the result (a gap) without touching the state, so smoothing resumes after it.
    The seed-parity numbers keep the study script's formula (``ema``).
    """
    steps = np.asarray(steps, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(values))
    if finite.size == 0:
        return out
    gaps = np.diff(steps[finite], prepend=steps[finite[0]] - 1.0)
    decay = np.power(1.0 - alpha, gaps)
    gain = 1.0 - decay
    pairs = zip(decay.tolist(), (gain * values[finite]).tolist(), gain.tolist(), strict=True)
    state = accumulate(
        pairs,
        lambda acc, new: (new[0], new[0] * acc[1] + new[1], new[0] * acc[2] + new[2]),
    )
    smoothed = np.array([(mean, weight) for _, mean, weight in state])
    out[finite] = smoothed[:, 0] / smoothed[:, 1]
    return out
