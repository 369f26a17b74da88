"""Smoothing and alignment of loss curves."""

from __future__ import annotations

from itertools import accumulate
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl


def ema(values: pl.Series, alpha: float) -> pl.Series:
    """Exponential moving average m[0] = x[0], m[t] = (1 - alpha) * m[t-1] + alpha * x[t].

    The recurrence is sequential; ``alpha * x`` is computed vectorised and the scan runs in
    ``itertools.accumulate``'s C loop. Evaluating the same expression in the same order keeps
    the result bit-identical to the study's original script (polars' ``ewm_mean`` rounds
    differently in the last bits). A NaN poisons every later value, as in the original.
    """
    import polars as pl

    if values.len() == 0:
        return values.cast(pl.Float64)
    decay = 1 - alpha
    scaled = (values * alpha).to_list()
    scaled[0] = values[0]
    smoothed = accumulate(scaled, lambda mean, step: decay * mean + step)
    return pl.Series(values.name, list(smoothed), dtype=pl.Float64)
