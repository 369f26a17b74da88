"""Whether Ctrl-C or SIGTERM came while the command line runs a command: its signal handler
notes it before it raises KeyboardInterrupt. A library may turn the KeyboardInterrupt raised in
its call back into Python into an error of its own with no trace of it (polars reading a
dtype: "TypeError: '<unprintable str object>' is not a Polars data type"); ``interrupted``
still knows it for one. Apart from ``tracker.errors``, whose bytes key every database's kept
rows (``tracker.summary.version``): a change here does not make them all stale.
"""

from __future__ import annotations

from tracker.errors import raised_by_interrupt

_SIGNALLED: list[bool] = []


def note_interrupt() -> None:
    """A signal that interrupts the command came."""
    _SIGNALLED.append(True)


def forget_interrupts() -> None:
    """The command is over: a signal before the next one is none of its business."""
    _SIGNALLED.clear()


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` stands for a Ctrl-C: one came (``note_interrupt``), or the interrupt is
    in its chain (``raised_by_interrupt``)."""
    return bool(_SIGNALLED) or raised_by_interrupt(exc)
