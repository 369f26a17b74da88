"""``tracker serve`` under 32 clients each asking a 50-run plot over 1M-step curves: every
answer's status and latency, and the server's peak memory.

    python bench/bench_serve_plot.py [--clients 32] [--before DIR]

One job of 10 arms of 1,000,000 steps each (cached under ~/.cache/tracker-bench, outside
git). A fresh ``tracker serve`` process on loopback, so that its peak resident memory (VmHWM)
is the run's own; CLIENTS clients at once, each asking ``/api/plot`` for 50 runs (the 10
repeated five times) over the whole range, then the same with ``smooth=0.9``. Target: peak
RSS < 1 GB, every answer a 200 or a 503 (past the 10 s of queueing), each within 30 s.

``--before DIR``: the same against the tracker sources in DIR (e.g. main unpacked with
``git archive``), in the same run, for a before/after comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from pathlib import Path

from bench.bench_serve_load import Server, build, crowd

STEPS = 1_000_000
ARMS = tuple(f"ref_s{i}" for i in range(10))
RUNS = "&".join(f"run=long/{ARMS[i % len(ARMS)]}" for i in range(50))
PLOTS = {"raw": f"/api/plot?{RUNS}", "smooth=0.9": f"/api/plot?{RUNS}&smooth=0.9"}


def run(url: str, clients: int, before: Path | None) -> None:
    label = "this tree" if before is None else f"before ({before})"
    print(f"\n## {label}: {clients} clients, 50-run plots of {STEPS:,}-step curves\n")
    print("| plot | requests | 200 | 503 | other | slowest | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    for name, path in PLOTS.items():
        server = Server(url, before)
        try:
            idle = server.memory_mb()[0]
            sampled = Sampled(server)
            timings, statuses = asyncio.run(crowd(server.base, [[path]] * clients))
            peak = sampled.stop()
        finally:
            server.stop()
        other = sum(n for status, n in statuses.items() if status not in (200, 503))
        code = server.process.returncode  # 130: stopped by the SIGTERM, as asked
        died = "" if code in (0, 130) else f", died: exit {code}"
        print(
            f"| {name} | {len(timings)} | {statuses.get(200, 0)} | {statuses.get(503, 0)} "
            f"| {other} | {max(timings) / 1000:.1f} s | {peak:.0f} MB (idle {idle:.0f}){died} |",
            flush=True,
        )


class Sampled:
    """The server's peak memory: its VmHWM while it lives, else (it died) the highest VmRSS
    seen by sampling every 0.1 s."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.highest = 0.0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.wait(0.1):
            try:
                self.highest = max(self.highest, self.server.memory_mb()[1])
            except (KeyError, OSError):  # the process has ended
                return

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        try:
            return self.server.memory_mb()[1]
        except (KeyError, OSError):
            return self.highest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--before", type=Path, default=None)
    args = parser.parse_args()
    url = build("long", STEPS, ARMS)
    run(url, args.clients, None)
    if args.before is not None:
        run(url, args.clients, args.before)


if __name__ == "__main__":
    main()
