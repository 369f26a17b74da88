"""Sample-job cases of the golden files: case name -> keyword arguments of
``tracker.sample.write_sample_job``.

The single source of truth for ``make_golden.py`` (which ran the reference script on these
jobs) and for the tests that compare the tracker against the goldens.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

CASES: dict[str, dict[str, Any]] = {
    # seed 0, default arms, default failed probe (gpt-355m / ref out of memory)
    "full": {"seed": 0, "steps": 2000},
    # every probe succeeds
    "no_failure": {"seed": 1, "steps": 2000, "failed_probe": None},
    # no ref_s1: no seed-noise metric
    "no_second_seed": {"seed": 2, "steps": 2000, "arms": ("ref_s0", "flash_s0", "linear_s0")},
    # no linear_s0: no divergence metrics
    "no_linear": {"seed": 3, "steps": 2000, "arms": ("ref_s0", "flash_s0", "ref_s1")},
    # memory probes only, no training arm
    "probes_only": {"seed": 4, "steps": 2000, "arms": ()},
    # simulated library regression: flash optimizer state +0.5 B/param
    "regressed": {"seed": 5, "steps": 2000, "flash_state_shift": 0.5, "failed_probe": None},
}


OUTPUTS = ("mem_analysis.json", "gpt_analysis.json")


def run_reference(script: Path, job: Path, workdir: Path) -> Path:
    """Run the study's script on ``job``; returns the folder it wrote its JSON files to (it
    writes below its working directory)."""
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, str(script), str(job)],
        cwd=workdir,
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=900,  # a safety net against a hang, never a verdict
    )
    return workdir / "repro_flashoptim" / "outputs" / "job2"
