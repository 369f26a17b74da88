"""A kept summary read back, or the one line saying it is damaged: never a traceback."""

from __future__ import annotations

from tracker.errors import DamagedSummary
from tracker.summary.model import Summary

# what a document that is not a summary raises on its way through ``Summary.from_json``
UNREADABLE = (ValueError, KeyError, TypeError, IndexError, AttributeError)


def read_summary(job: str, document: str) -> Summary:
    """Job ``job``'s summary from its stored document."""
    try:
        return Summary.from_json(document)
    except UNREADABLE as exc:
        reason = f"{type(exc).__name__} reading it"
        raise DamagedSummary(job=job, reason=reason) from None
