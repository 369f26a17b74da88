"""A real ``tracker serve`` process on a free port, for the tests that talk to it over TCP."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SAFETY_S = 300  # only a net under a server that never starts; no verdict depends on it
RUNNING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


@contextmanager
def running_server(url: str, *options: str) -> Iterator[str]:
    """``tracker serve --port 0`` (and ``options``) on the database ``url``; yields its base
    URL once uvicorn names it (the event waited for), and stops the server after."""
    command = [sys.executable, "-m", "tracker", "--db", url, "serve", "--port", "0", *options]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put("")  # the process ended

    threading.Thread(target=read, daemon=True).start()
    seen = []
    try:
        while True:
            line = lines.get(timeout=SAFETY_S)
            seen.append(line)
            assert line, f"the server ended before listening: {''.join(seen)}"
            found = RUNNING.search(line)
            if found:
                yield found.group(1)
                return
    finally:
        process.terminate()
        process.wait(timeout=SAFETY_S)
