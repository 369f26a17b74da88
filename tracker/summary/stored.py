"""A kept summary read back, or the one line saying it is damaged: never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import zstandard

from tracker.errors import DamagedSummary
from tracker.summary.grid import GridCurve
from tracker.summary.model import Summary, SummaryChecksumMismatch, curves_from_stored
from tracker.summary.trajectories import TrajectoryDrawing

T = TypeVar("T")

# what stored bytes that are not a summary raise on their way through ``Summary.from_stored``
# (an unknown format byte is a ValueError too)
UNREADABLE = (ValueError, KeyError, TypeError, IndexError, AttributeError, zstandard.ZstdError)


def read_grid_curves(job: str, data: bytes) -> dict[str, GridCurve]:
    """Job ``job``'s smoothed curves from their stored bytes (``Summary.curves_to_stored``)."""
    return _read(job, lambda: curves_from_stored(data, job))


def read_summary(job: str, data: bytes, draw: Callable[[], TrajectoryDrawing]) -> Summary:
    """Job ``job``'s summary from its stored bytes; ``draw`` as for ``Summary.from_stored``."""
    return _read(job, lambda: Summary.from_stored(data, job, draw))


def _read(job: str, read: Callable[[], T]) -> T:
    try:
        return read()
    except SummaryChecksumMismatch as exc:
        raise DamagedSummary(job=job, reason=str(exc)) from None
    except UNREADABLE as exc:
        reason = f"{type(exc).__name__} reading it"
        raise DamagedSummary(job=job, reason=reason) from None
