"""Shape-preserving downsampling of long curves, for drawing only.

A figure cannot usefully show more points per trace than it has pixels across, and writing
every point of a 100,000-step curve into the HTML is what made the study's original figures
11 MB. ``minmax_indices`` keeps, per bucket of consecutive points, the first, the last, the
lowest and the highest point (the "M4" scheme): the drawn line then has the same envelope,
spikes and extremes as the full one. Non-finite values (NaN, +-inf) are gaps when drawn, so
the first non-finite point of each bucket is kept too: a gap never silently disappears.

Smoothing and verdicts always use the full series; only the drawing is downsampled.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

# first, last, min, max, first non-finite
POINTS_PER_BUCKET = 5
DEFAULT_MAX_POINTS = 2000


def minmax_indices(y: npt.ArrayLike, max_points: int = DEFAULT_MAX_POINTS) -> npt.NDArray[np.int64]:
    """Sorted indices of at most ``max_points`` points of ``y`` that keep its shape.

    All indices when ``y`` has at most ``max_points`` values. Otherwise ``y`` is cut into
    ``max_points // 5`` buckets of consecutive values; each contributes its first and last
    index, the index of its minimum and of its maximum over finite values, and the index of
    its first non-finite value (if any). Pure: ``y`` is not modified.
    """
    if max_points < POINTS_PER_BUCKET:
        raise ValueError(f"max_points must be >= {POINTS_PER_BUCKET}, got {max_points}")
    values = np.asarray(y, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"expected a 1-d series, got shape {values.shape}")
    n = values.size
    if n <= max_points:
        return np.arange(n, dtype=np.int64)

    buckets = max_points // POINTS_PER_BUCKET
    size = -(-n // buckets)  # ceil: every bucket but the last is full
    buckets = -(-n // size)
    padded = np.full(buckets * size, np.nan)
    padded[:n] = values
    grid = padded.reshape(buckets, size)
    finite = np.isfinite(grid)
    starts = np.arange(buckets, dtype=np.int64) * size

    low = np.where(finite, grid, np.inf).argmin(axis=1)
    high = np.where(finite, grid, -np.inf).argmax(axis=1)
    has_finite = finite.any(axis=1)
    # index n-1 lies in the last bucket; padding sits after it and is never selected
    last = np.minimum(starts + size - 1, n - 1)
    real = np.zeros_like(finite)
    real.reshape(-1)[:n] = True
    gap_cells = ~finite & real
    has_gap = gap_cells.any(axis=1)
    first_gap = gap_cells.argmax(axis=1)

    # marked in a mask, not np.unique: sorting (or hashing) the picks costs more than the rest
    picked = np.zeros(n, dtype=bool)
    for chosen in (starts, last, (starts + low)[has_finite], (starts + high)[has_finite]):
        picked[chosen] = True
    picked[(starts + first_gap)[has_gap]] = True
    return np.flatnonzero(picked).astype(np.int64)


def downsample(
    x: npt.ArrayLike, y: npt.ArrayLike, max_points: int = DEFAULT_MAX_POINTS
) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.float64]]:
    """``(x, y)`` reduced to at most ``max_points`` shape-preserving points (see above)."""
    xs = np.asarray(x)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y differ in shape: {xs.shape} != {ys.shape}")
    keep = minmax_indices(ys, max_points)
    return xs[keep], ys[keep]
