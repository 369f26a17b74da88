"""A kept summary read back, or the one line saying it is damaged: never a traceback."""

from __future__ import annotations

from collections.abc import Callable

import zstandard

from tracker.errors import DamagedSummary
from tracker.summary.model import Summary, SummaryChecksumMismatch
from tracker.summary.trajectories import TrajectoryDrawing

# what stored bytes that are not a summary raise on their way through ``Summary.from_stored``
# (an unknown format byte is a ValueError too)
UNREADABLE = (ValueError, KeyError, TypeError, IndexError, AttributeError, zstandard.ZstdError)


def read_summary(job: str, data: bytes, draw: Callable[[], TrajectoryDrawing]) -> Summary:
    """Job ``job``'s summary from its stored bytes; ``draw`` as for ``Summary.from_stored``."""
    try:
        return Summary.from_stored(data, draw)
    except SummaryChecksumMismatch as exc:
        raise DamagedSummary(job=job, reason=str(exc)) from None
    except UNREADABLE as exc:
        reason = f"{type(exc).__name__} reading it"
        raise DamagedSummary(job=job, reason=reason) from None
