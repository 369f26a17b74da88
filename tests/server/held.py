"""A function of the server held on an event: each call counted as it starts and kept waiting
until the test releases it, then run as it is. Tests of queues and shared work wait for these
counts, never for time."""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

import pytest

SAFETY_S = 300  # only a net under a hang; no verdict depends on it


class HeldCalls:
    """``module.name``, counted and held until ``release`` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str) -> None:
        self.calls = 0
        self.release = threading.Event()
        self.entered = threading.Condition()
        real = getattr(module, name)

        def held(*args: Any, **kwargs: Any) -> Any:
            with self.entered:
                self.calls += 1
                self.entered.notify_all()
            assert self.release.wait(SAFETY_S)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, held)

    def wait_for_calls(self, n: int) -> None:
        with self.entered:
            assert self.entered.wait_for(lambda: self.calls >= n, SAFETY_S)
