"""Per-request work kept between requests, keyed by the state of the jobs it is made from.

A key holds a digest of each such job's content and metadata (``tracker.server.views``),
read in the same snapshot as the result, so it can never serve a stale result: no
invalidation, and a job ingested or edited while the server runs is simply a key not seen
yet. What depends on a job's content alone (a downsampled curve) is keyed by its content
digest only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class DigestCache(Generic[T]):
    """A thread-safe LRU of at most ``size`` results. Two requests missing the same key at
    once both compute it (the work is pure); the lock is never held while computing."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = compute()
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)
