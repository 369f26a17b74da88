"""Arrays kept in JSON, and the y range a drawn curve is zoomed to."""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np

# A curve figure's y axis starts its range after this share of the steps (the first drop
# would flatten the rest); double-click shows everything.
ZOOM_AFTER = 0.1


def packed(values: np.ndarray, dtype: str) -> str:
    """An array kept in JSON: base64 of its bytes as ``dtype`` (e.g. ``"<f8"``), exact and
    parsed many times faster than a list of numbers."""
    return base64.b64encode(values.astype(dtype).tobytes()).decode("ascii")


def unpacked(text: str, dtype: str) -> np.ndarray:
    """The array ``packed`` kept, in native byte order."""
    return np.frombuffer(base64.b64decode(text), dtype=dtype).astype(dtype[1:])


def late_range(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float] | None:
    """The y range of drawn curves ``(x, y)`` from ``ZOOM_AFTER`` of each one's steps on,
    when the part before would flatten them (it spans 1.5x more); else None."""
    finite, late = [], []
    for x, y in curves:
        ok = np.isfinite(y)
        finite.append(y[ok])
        if x.size:
            first, last = float(x[0]), float(x[-1])
            late.append(y[ok & (x >= first + ZOOM_AFTER * (last - first))])
    values = np.concatenate(finite) if finite else np.empty(0)
    tail = np.concatenate(late) if late else np.empty(0)
    if not tail.size or values.max() - tail.min() <= 1.5 * (tail.max() - tail.min()):
        return None
    low, high = float(tail.min()), float(tail.max())
    pad = 0.06 * (high - low) or 0.01
    return low - pad, high + pad
