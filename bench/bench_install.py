"""A newcomer's first minute: the README's commands in a fresh clone with empty package caches.

    python bench/bench_install.py [--baseline REV] [--pip-fallback]

Clones this checkout's HEAD into a temporary folder and times, with `PIP_CACHE_DIR` and
`UV_CACHE_DIR` pointing at empty folders: `make demo` (the venv, the locked install of what
the demo needs, the demo itself), then the test extras' install plus test collection
(`make .venv/.installed-test` and `pytest --collect-only`). `--baseline REV` times `make demo`
of another commit the same way, in the same run (the install before the lock: 74e8345);
`--pip-fallback` times pip alone installing the lock with the test extras (where uv fails).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fresh_clone(into: Path, revision: str) -> dict[str, str]:
    """A clone at `revision` and an environment whose package caches are empty folders."""
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", revision], check=True)
    caches = into.parent / f"{into.name}-caches"
    environment = dict(os.environ)
    for name in ("PIP_CACHE_DIR", "UV_CACHE_DIR"):
        folder = caches / name
        folder.mkdir(parents=True)
        environment[name] = str(folder)
    return environment


def timed(label: str, command: list[str], cwd: Path, environment: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=environment, check=True, capture_output=True)
    seconds = time.perf_counter() - started
    load = os.getloadavg()[0]
    print(f"{label:<44} {seconds:7.1f} s   (load average {load:.1f})", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="another commit whose `make demo` is timed too")
    parser.add_argument("--pip-fallback", action="store_true")
    arguments = parser.parse_args()
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-install-") as scratch:
        clone = Path(scratch) / "head"
        environment = fresh_clone(clone, head)
        timed(f"make demo ({head})", ["make", "demo"], clone, environment)
        python = str(clone / ".venv" / "bin" / "python")
        extras = timed(
            "test extras' install", ["make", ".venv/.installed-test"], clone, environment
        )
        collect = timed(
            "test collection", [python, "-m", "pytest", "--collect-only", "-q"], clone, environment
        )
        print(f"{'test extras + collection':<44} {extras + collect:7.1f} s")
        if arguments.pip_fallback:
            clone = Path(scratch) / "pip"
            environment = fresh_clone(clone, head)
            subprocess.run([sys.executable, "-m", "venv", str(clone / ".venv")], check=True)
            timed(
                "pip alone: the lock with the test extras",
                [
                    str(clone / ".venv" / "bin" / "python"),
                    *("-m", "pip", "install", "--quiet", "--constraint", "requirements.lock"),
                    *("-e", ".[test]"),
                ],
                clone,
                environment,
            )
        if arguments.baseline:
            clone = Path(scratch) / "baseline"
            environment = fresh_clone(clone, arguments.baseline)
            timed(f"make demo ({arguments.baseline})", ["make", "demo"], clone, environment)


if __name__ == "__main__":
    main()
