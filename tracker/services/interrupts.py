"""Ctrl-C (SIGINT) or SIGTERM in a command that stores jobs one transaction at a time.

The command keeps a ``Tally`` of the names it stores; ``telling_interrupts`` turns the
interrupt into an ``Interrupted`` naming what was stored and what was not, which the command
line prints as one line before it exits with code 130. The name in flight when the interrupt
came is asked about (``landed``): its commit may have gone through just before it.

A Ctrl-C that lands while a finalizer or a weakref callback runs (a garbage collection) is
raised there and ignored by Python ("Exception ignored in ..."): the command would go on to
its end as if none had come. While a command runs, ``keep_lost_interrupt`` keeps it, and
each job's end in a ``Tally`` (``raise_lost_interrupt``) raises it.

A command of several transactions (ingest, copy, sync) uses it so::

    tally = Tally(names, landed=lambda name: ...is it in the database now?)
    with telling_interrupts(tally):
        for name in names:
            ...store name in its own transaction...
            tally.stored(name)  # or tally.not_stored(name) when it failed
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from tracker.errors import Interrupted
from tracker.signal_note import interrupted

# Interrupts Python swallowed while a command ran (``keep_lost_interrupt``).
_LOST_INTERRUPTS: list[BaseException] = []


def keep_lost_interrupt(unraisable: Any) -> None:
    """``sys.unraisablehook`` while a command runs: an interrupt swallowed is kept for
    ``raise_lost_interrupt`` (raised here, it would be swallowed again); anything else is
    printed as Python does."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _LOST_INTERRUPTS.append(unraisable.exc_value)
        return
    sys.__unraisablehook__(unraisable)


@contextmanager
def keeping_lost_interrupts() -> Iterator[None]:
    """While a command runs: an interrupt Python swallows is kept (``keep_lost_interrupt``);
    after it, Python's hook again and nothing kept."""
    hook = sys.unraisablehook
    sys.unraisablehook = keep_lost_interrupt
    try:
        yield
    finally:
        sys.unraisablehook = hook
        _LOST_INTERRUPTS.clear()


def raise_lost_interrupt() -> None:
    """At a step of a command (a job's end, ingest's progress), the interrupt Python
    swallowed since, if any."""
    if _LOST_INTERRUPTS:
        _LOST_INTERRUPTS.clear()
        raise KeyboardInterrupt


class Tally:
    """Names to store, in order; what became of each so far. ``landed`` tells, after an
    interrupt, whether the name in flight is in the database."""

    def __init__(self, names: Iterable[str], landed: Callable[[str], bool] | None = None) -> None:
        self.pending = list(names)
        self.landed = landed
        self.done: list[str] = []
        self.refused: list[str] = []

    def add(self, name: str) -> None:
        """A name to store, found as the command goes (a sync finds its jobs one by one)."""
        self.pending.append(name)

    def stored(self, name: str) -> None:
        self._take(name)
        self.done.append(name)
        raise_lost_interrupt()

    def not_stored(self, name: str) -> None:
        self._take(name)
        self.refused.append(name)
        raise_lost_interrupt()

    def _take(self, name: str) -> None:
        if name in self.pending:
            self.pending.remove(name)

    def interrupted(self) -> Interrupted:
        """What to say now: the name in flight counts as stored if it landed."""
        pending = list(self.pending)
        if pending and self.landed is not None and self._landed(pending[0]):
            self.stored(pending[0])
            pending = pending[1:]
        return Interrupted.of_jobs(self.done, self.refused + pending)

    def _landed(self, name: str) -> bool:
        assert self.landed is not None
        try:
            return self.landed(name)
        except Exception:  # the database is gone too: what cannot be seen is not counted
            return False


@contextmanager
def telling_interrupts(tally: Tally) -> Iterator[Tally]:
    """An interrupt in the block (or an error it caused) becomes ``Interrupted``, naming
    what ``tally`` knows."""
    try:
        yield tally
    except Interrupted:
        raise
    except BaseException as exc:
        if not interrupted(exc):
            raise
        raise tally.interrupted() from None


def session_after_interrupt(engine: Engine) -> Session:
    """A session on a new connection, for a ``landed`` question: the interrupt may have left
    a pooled connection in the middle of a command."""
    engine.dispose()
    return Session(engine)
