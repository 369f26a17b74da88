"""Benchmarks (see docs/benchmarks.md). Shared: what a timed ``tracker`` process starts from."""

import compileall
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def compile_tracker() -> None:
    """Compile the tracker's modules to bytecode, as installing a wheel does, so that a timed
    ``tracker`` process reads them instead of compiling its source (about 0.05 s a run). An
    editable install writes them on first import, unless PYTHONDONTWRITEBYTECODE is set, as
    it is in some sandboxes and containers."""
    compileall.compile_dir(REPO / "tracker", quiet=1)
