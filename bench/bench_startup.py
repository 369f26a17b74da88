"""What a command costs before it does anything: bytecode compiled at install or not.

    python bench/bench_startup.py [--repeat 5]

Where Python writes no bytecode (``PYTHONDONTWRITEBYTECODE=1``, read-only installs,
containers), every command compiles its libraries' source again. Two venvs are installed
from the lock side by side, as the Makefile installs them: one as ``uv pip install`` does by
default (no bytecode), one with ``--compile-bytecode`` and the tracker's own modules
compiled (what ``make demo`` does now). Each times, best of REPEAT in CPU seconds (user +
system of the process), ``tracker jobs``, ``tracker query runs`` and ``tracker claims`` on
the demo database, with ``PYTHONDONTWRITEBYTECODE=1``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import REPO

COMMANDS = [["jobs"], ["query", "runs"], ["claims"]]


def venv(folder: Path, compiled: bool) -> Path:
    """A venv at ``folder`` holding the lock's packages and the tracker (editable)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    flags = ["--compile-bytecode"] if compiled else []
    install = [uv, "pip", "install", "--quiet", "--python", str(python), *flags]
    subprocess.run(
        [*install, "--constraint", str(REPO / "requirements.lock"), "-e", str(REPO)], check=True
    )
    return folder / "bin" / "tracker"


def cpu_seconds(command: list[str], environment: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, env=environment, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    environment = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch:
        root = Path(scratch)
        for cache in REPO.joinpath("tracker").rglob("__pycache__"):
            shutil.rmtree(cache)  # the plain venv runs the source, as an editable install does
        plain = venv(root / "plain", compiled=False)
        url = f"sqlite:///{root / 'demo.db'}"
        demo = [str(plain), "--db", url, "demo", "--dir", str(root / "jobs")]
        subprocess.run([*demo, "--out", str(root / "report")], check=True, capture_output=True)
        timings: dict[str, list[float]] = {}
        for label, tracker in [("plain", plain), ("compiled", None)]:
            if tracker is None:
                tracker = venv(root / "compiled", compiled=True)
                subprocess.run(
                    [str(tracker.parent / "python"), "-m", "compileall", "-q", "tracker"],
                    cwd=REPO,
                    check=True,
                )
            timings[label] = [
                min(
                    cpu_seconds([str(tracker), "--db", url, *command], environment)
                    for _ in range(args.repeat)
                )
                for command in COMMANDS
            ]
    print(f"{'command':<22} {'no bytecode':>12} {'compiled':>10} {'ratio':>7}")
    for command, plain_s, compiled_s in zip(
        COMMANDS, timings["plain"], timings["compiled"], strict=True
    ):
        name = "tracker " + " ".join(command)
        print(f"{name:<22} {plain_s:>10.2f} s {compiled_s:>8.2f} s {plain_s / compiled_s:>6.1f}x")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
