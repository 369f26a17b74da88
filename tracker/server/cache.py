"""Per-request work kept between requests, keyed by the state of the jobs it is made from,
and the bound on heavy work.

A key holds a digest of each such job's content and metadata (``tracker.server.page_cache``),
read in the same snapshot as the result, so it can never serve a stale result: no
invalidation, and a job ingested or edited while the server runs is simply a key not seen
yet. What depends on a job's content alone (a downsampled curve) is keyed by its content
digest only.

Requests missing the same key at once share one computation (single flight), and a cache
given a ``HeavyWork`` computes only within one of its few slots: 64 clients asking for the
same or for different large windows cost one or a few computations at a time, not 64.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tracker.errors import ServerBusy

T = TypeVar("T")
HEAVY_SLOTS = 2  # heavy computations at once: one per core of a small machine
HEAVY_PATIENCE_S = 10.0  # how long a request queues for a slot before a 503
RETRY_AFTER_S = 5  # what that 503 suggests


class HeavyWork:
    """At most ``slots`` heavy computations at once. A request finding every slot taken
    waits up to ``patience_s`` for one, then is refused with ``ServerBusy`` (503 with
    ``Retry-After``); given when the request ``arrived``, its patience counts from then,
    so that time spent queued for a worker thread is queueing too. A thread already holding
    a slot (a computation needing another cached one) takes no second slot, so nested work
    cannot deadlock."""

    def __init__(self, slots: int = HEAVY_SLOTS, patience_s: float = HEAVY_PATIENCE_S) -> None:
        self.slots = slots
        self.patience_s = patience_s
        self._free = threading.BoundedSemaphore(slots)
        self._held = threading.local()

    @contextmanager
    def slot(self, arrived: float | None = None) -> Iterator[None]:
        if getattr(self._held, "slot", False):
            yield
            return
        waited = 0.0 if arrived is None else time.monotonic() - arrived
        if not self._free.acquire(timeout=max(0.0, self.patience_s - waited)):
            raise ServerBusy(slots=self.slots, seconds=RETRY_AFTER_S)
        self._held.slot = True
        try:
            yield
        finally:
            self._held.slot = False
            self._free.release()


@dataclass
class _Flight:
    """One computation under way, and the requests waiting for its result."""

    waiting: int = 0
    finished: bool = False
    value: Any = None
    error: BaseException | None = None


class DigestCache(Generic[T]):
    """A thread-safe LRU of at most ``size`` results. Requests missing the same key at once
    share one computation (the first computes, the others wait for its result or its error);
    the lock is never held while computing. With ``heavy``, computations take one of its
    slots."""

    def __init__(self, size: int, heavy: HeavyWork | None = None) -> None:
        self.size = size
        self.heavy = heavy
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._flights: dict[Hashable, _Flight] = {}
        self._lock = threading.Lock()
        # notified whenever a computation gains a waiter or ends
        self.changed = threading.Condition(self._lock)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            flight = self._flights.get(key)
            if flight is not None:
                return self._wait(flight)
            flight = self._flights[key] = _Flight()
        try:
            with self.heavy.slot() if self.heavy is not None else nullcontext():
                value = compute()
        except BaseException as exc:
            with self._lock:
                flight.error, flight.finished = exc, True
                del self._flights[key]
                self.changed.notify_all()
            raise
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            flight.value, flight.finished = value, True
            del self._flights[key]
            self.changed.notify_all()
        return value

    def _wait(self, flight: _Flight) -> T:
        """The shared computation's result (called holding the lock, which waiting frees)."""
        flight.waiting += 1
        self.changed.notify_all()
        self.changed.wait_for(lambda: flight.finished)
        if flight.error is not None:
            raise flight.error
        value: T = flight.value
        return value

    def waiting(self) -> int:
        """How many requests wait for a computation under way, over every key."""
        return sum(flight.waiting for flight in self._flights.values())

    def __len__(self) -> int:
        return len(self._items)
