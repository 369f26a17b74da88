"""Ingest and sync from S3 (moto's S3 server on loopback) against the same work from disk.

    python bench/bench_remote.py [--steps 250000] [--jobs 1000] [--repeat 2] [--part ingest|sync]

1. Ingest: a job of 4 arms x STEPS steps, whole ``tracker ingest`` processes into fresh SQLite
   databases: from the job directory on disk, and from ``s3://`` (the same files uploaded to the
   loopback server); best of REPEAT each, alternating. Target: disk time / S3 time >= 0.7, and
   the peak RSS of the S3 ingest no higher than from disk.
2. Sync: JOBS small jobs in the bucket, all ingested by a first ``tracker sync``; then a second
   ``tracker sync`` process that finds nothing new. Target: <= 5 s, and no object downloaded
   (the server's GET requests of objects are counted).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/s3_server.py

from bench.bench_ingest import MEASURE_CHILD
from tests.s3_server import S3Server
from tracker.sample import write_sample_job
from tracker.store.schema import open_database


def tracker(work: Path, *args: str) -> tuple[float, float, str]:
    """A whole ``tracker`` process: wall time, peak RSS (MB), its output."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE_CHILD, *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=work,
    )
    elapsed = time.perf_counter() - start
    *output, peak = done.stdout.splitlines()
    return elapsed, int(peak) / 1024, "\n".join(output)


def fresh_database(work: Path, name: str) -> str:
    url = f"sqlite:///{work / name}"
    open_database(url).dispose()
    return url


def bench_ingest(server: S3Server, work: Path, steps: int, repeat: int) -> None:
    job = write_sample_job(work / "bigjob", steps=steps)
    bucket = server.new_bucket()
    server.upload(job, bucket, "study/bigjob")
    size = sum(path.stat().st_size for path in job.iterdir())
    disk, remote = [], []
    for run in range(repeat):
        disk.append(tracker(work, "--db", fresh_database(work, f"d{run}.db"), "ingest", str(job)))
        url = f"s3://{bucket}/study/bigjob"
        remote.append(tracker(work, "--db", fresh_database(work, f"s{run}.db"), "ingest", url))
    assert disk[0][2] == remote[0][2], (disk[0][2], remote[0][2])
    disk_s, remote_s = min(t for t, _, _ in disk), min(t for t, _, _ in remote)
    print(f"job: 4 arms x {steps:,} steps, {size / 1e6:.0f} MB of files; {disk[0][2]}")
    print(f"ingest from disk: {disk_s:.2f} s, peak RSS {max(m for _, m, _ in disk):.0f} MB")
    print(f"ingest from S3  : {remote_s:.2f} s, peak RSS {max(m for _, m, _ in remote):.0f} MB")
    print(f"ratio disk/S3 time: {disk_s / remote_s:.2f} (target >= 0.7)")


def bench_sync(server: S3Server, work: Path, jobs: int) -> None:
    template = write_sample_job(work / "small", steps=5, failed_probe=None)
    files = {path.name: path.read_bytes() for path in template.iterdir()}
    bucket = server.new_bucket()
    client = server.client()
    for i in range(jobs):
        for name, data in files.items():
            client.put_object(Bucket=bucket, Key=f"study/job{i:04d}/{name}", Body=data)
    url = fresh_database(work, "sync.db")
    prefix = f"s3://{bucket}/study/"
    first, _, out = tracker(work, "--db", url, "sync", prefix)
    print(f"first sync of {jobs} jobs: {first:.1f} s: {out.splitlines()[-1]}")
    server.traffic.reset()
    second, _, out = tracker(work, "--db", url, "sync", prefix)
    gets, server_s = server.traffic.object_gets(), server.traffic.busy_s
    listings = len(server.traffic.requests)
    print(f"second sync: {second:.2f} s (target <= 5 s): {out.splitlines()[-1]}")
    listing_s, _, _ = tracker(work, "--db", url, "jobs", "--format", "csv")
    print(f"  for scale, a `tracker jobs` process on the same database: {listing_s:.2f} s")
    print(f"  requests: {listings} (listing pages), object GETs: {gets} (target 0)")
    print(f"  of which the S3 server (moto, in this process) took {server_s:.2f} s to answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=250_000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--part", choices=["ingest", "sync"], help="only this one (default both)")
    args = parser.parse_args()
    server = S3Server()
    os.environ.update(server.environment())  # the children reach it the standard way
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if args.part in (None, "ingest"):
                bench_ingest(server, Path(tmp), args.steps, args.repeat)
            if args.part in (None, "sync"):
                bench_sync(server, Path(tmp), args.jobs)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
