"""``tracker serve`` under 64 clients asking for heavy curve windows: answers, latency, memory.

    python bench/bench_serve_load.py [--clients 64] [--requests 4] [--before DIR]

One job whose single arm has 500,000 steps (cached under ~/.cache/tracker-bench, outside
git). Each phase starts a fresh ``tracker serve`` process on loopback, so that its peak
resident memory (VmHWM) is the phase's own:

1. ``one client``: the whole window (``/api/curve?...&start=0&end=499999``), one request at
   a time: the baseline the other phases are compared with;
2. ``same window``: CLIENTS clients at once, REQUESTS each, all asking that same window (the
   issue's case: they share one computation, then its cached answer);
3. ``distinct windows``: CLIENTS clients at once, REQUESTS each, every request a different
   window of at least 100,000 steps (nothing to share: at most 2 computed at once, the rest
   queue, a 503 with Retry-After past 10 s of queueing);
4. ``first views``: CLIENTS clients at once on a cold server, each opening the job's page
   and the curve explorer's first view (the stampede of the cached first view).

``--before DIR``: the same phases against the tracker sources in DIR (e.g. an older commit
unpacked with ``git archive``), in the same run, for a before/after comparison.
Target (issue 21): peak RSS < 500 MB under 64 clients; no error other than a 503.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from pathlib import Path

import httpx

from bench import bench_serve
from bench.bench_serve import CACHE, percentile
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.schema import open_database
from tracker.store.transactions import in_write_transaction

STEPS = 500_000
MIN_WIDTH = 100_000
WHOLE = f"/api/curve?job=wide&arm=ref_s0&start=0&end={STEPS - 1}"


def build(name: str = "wide", steps: int = STEPS, arms: tuple[str, ...] = ("ref_s0",)) -> str:
    """A database of one job ``name`` of ``arms`` of ``steps`` each, built once and cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"serve-{name}.db"
    url = f"sqlite:///{path}"
    if path.exists():
        return url
    source = CACHE / f"serve-{name}-{steps}-{len(arms)}"
    if not source.is_dir():
        write_sample_job(source, steps=steps, arms=arms, probes=False)
    engine = open_database(url)
    in_write_transaction(engine, lambda session: ingest_job(session, source, name=name))
    engine.dispose()
    return url


class Server(bench_serve.Server):
    """``bench_serve``'s server, with its memory now and at its peak."""

    def memory_mb(self) -> tuple[float, float]:
        """Resident memory now and at its peak (VmRSS, VmHWM)."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines())
        rss, peak = (int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))
        return rss, peak

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def distinct_window(rng: random.Random) -> str:
    width = rng.randrange(MIN_WIDTH, STEPS + 1)
    start = rng.randrange(0, STEPS - width + 1)
    return f"/api/curve?job=wide&arm=ref_s0&start={start}&end={start + width - 1}"


async def crowd(base: str, plans: list[list[str]]) -> tuple[list[float], dict[int, int]]:
    """One client per plan, all at once, each asking its paths in turn."""
    timings: list[float] = []
    statuses: dict[int, int] = {}

    async def client(paths: list[str]) -> None:
        limits = httpx.Limits(max_connections=1)
        async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as http:
            for path in paths:
                start = time.perf_counter()
                try:
                    status = (await http.get(path)).status_code
                except httpx.HTTPError:
                    status = 0
                timings.append((time.perf_counter() - start) * 1000)
                statuses[status] = statuses.get(status, 0) + 1

    await asyncio.gather(*(client(paths) for paths in plans))
    return timings, statuses


def phases(clients: int, requests: int) -> dict[str, list[list[str]]]:
    rng = random.Random(21)
    first_views = ["/jobs/wide/", "/api/curve?job=wide&arm=ref_s0"]
    return {
        "one client": [[WHOLE] * requests],
        "same window": [[WHOLE] * requests for _ in range(clients)],
        "distinct windows": [
            [distinct_window(rng) for _ in range(requests)] for _ in range(clients)
        ],
        "first views": [rng.sample(first_views, 2) for _ in range(clients)],
    }


def run(url: str, clients: int, requests: int, before: Path | None) -> None:
    label = "this tree" if before is None else f"before ({before})"
    print(f"\n## {label}: {clients} clients, {STEPS:,}-step curve\n")
    print("| phase | requests | 200 | 503 | other | p50 | p99 | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for phase, plans in phases(clients, requests).items():
        server = Server(url, before)
        try:
            idle = server.memory_mb()[0]
            timings, statuses = asyncio.run(crowd(server.base, plans))
            peak = server.memory_mb()[1]
        finally:
            server.stop()
        other = sum(n for status, n in statuses.items() if status not in (200, 503))
        print(
            f"| {phase} | {len(timings)} | {statuses.get(200, 0)} | {statuses.get(503, 0)} "
            f"| {other} | {statistics.median(timings):.0f} ms "
            f"| {percentile(timings, 0.99):.0f} ms | {peak:.0f} MB (idle {idle:.0f}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--before", type=Path, default=None)
    args = parser.parse_args()
    url = build()
    run(url, args.clients, args.requests, None)
    if args.before is not None:
        run(url, args.clients, args.requests, args.before)


if __name__ == "__main__":
    main()
