"""Deterministic generator of realistic sample job directories.

The tracker ingests job directories written by the FlashOptim reproduction jobs (see the
job layout in the reference README): a ``mem_sweep.json`` of memory-probe records and one
``<variant>_s<seed>.csv`` / ``.json`` pair per GPT-2 124M training arm. The real jobs need a
GPU for hours; this module fabricates directories with the same layout and with numbers that
look like the real thing, so that tests, benchmarks, demos and golden files have realistic
inputs without any cloud job:

* memory probes for every (model, variant) pair, close to the analytic bytes/parameter of
  each variant, plus small fixed overheads that matter on small models and vanish on large
  ones, an optional out-of-memory failure record and an optional regression of the
  ``flash`` optimizer-state size (``flash_state_shift``);
* GPT-2 124M loss curves (about 10.9 at step 0, power-law decay to about 3.3 at the end)
  with matched data noise across variants of the same seed, so that ``flash`` tracks
  ``ref`` more closely than a second ``ref`` seed does; the ``linear`` ablation arm
  diverges (loss blows up, then ``inf``, then ``nan``).

The numbers (a variant's analytic bytes/param, overheads, step time, final validation loss,
deviation from the baseline, whether it diverges) and the demo's jobs are its study file's
``[sample]`` table's. Everything is a pure function of the arguments and those tables: the
same arguments give byte-identical files. Randomness comes from ``numpy.random.default_rng``
seeded with the job seed and a CRC32 of a stable label (never Python's ``hash()``), so each
record and each arm is independent of which other records or arms are written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracker.analysis.expectations import DEFAULT_STUDY
from tracker.analysis.sample_spec import SampleSpec
from tracker.sample.arms import parse_arm, write_arm
from tracker.sample.probes import (
    FLASHOPTIM_REGRESSED_VERSION,
    FLASHOPTIM_VERSION,
    MODELS,
    OOM_ERROR,
    TORCH_VERSION,
    mem_sweep,
)
from tracker.sample.study import sample_studies, sample_study

__all__ = [
    "DEFAULT_ARMS",
    "DEMO_META",
    "FLASHOPTIM_REGRESSED_VERSION",
    "FLASHOPTIM_VERSION",
    "MODELS",
    "OOM_ERROR",
    "SEED_JOB_ARMS",
    "TORCH_VERSION",
    "VARIANTS",
    "demo_meta",
    "sample_studies",
    "sample_study",
    "write_demo_jobs",
    "write_demo_seed_jobs",
    "write_sample_job",
]

# The default study's sample arms and probed variants: what a sample job has unless told.
DEFAULT_ARMS: tuple[str, ...] = sample_study(DEFAULT_STUDY).arms
SEED_JOB_ARMS: tuple[str, ...] = sample_study(DEFAULT_STUDY).seed_arms
VARIANTS: tuple[str, ...] = sample_study(DEFAULT_STUDY).probes


def write_sample_job(
    directory: Path,
    *,
    seed: int = 0,
    steps: int = 2000,
    arms: Sequence[str] = DEFAULT_ARMS,
    probes: bool = True,
    failed_probe: tuple[str, str] | None = ("gpt-355m", "ref"),
    flash_state_shift: float = 0.0,
    flash_loss_shift: float = 0.0,
    flash_val_loss_shift: float = 0.0,
    variants: tuple[str, ...] = VARIANTS,
) -> Path:
    """Write a realistic sample job directory and return it.

    Args:
        directory: created if missing; existing files of the same name are overwritten.
        seed: job seed (>= 0); the same arguments always give byte-identical files.
        steps: rows per training-arm CSV (steps 0..steps-1).
        arms: training arms ``<variant>_s<seed>`` (a variant of a study's ``[sample]``).
        probes: write ``mem_sweep.json`` (one record per model x variant).
        variants: the probed variants (``VARIANTS``, or another study's ``probes``).
        failed_probe: (model, variant) whose probe record is an out-of-memory failure.
        flash_state_shift: added to ``bpp_state`` of every ``flash`` probe record
            (a simulated library regression; the probes then report another version).
        flash_loss_shift: added to every training loss of the ``flash`` arms (a candidate
            that no longer tracks the baseline).
        flash_val_loss_shift: added to the final validation loss of the ``flash`` arms.
    """
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if failed_probe is not None and (
        failed_probe[0] not in MODELS or failed_probe[1] not in variants
    ):
        raise ValueError(f"unknown failed_probe {failed_probe!r}")
    arm_names = list(dict.fromkeys(arms))
    for arm in arm_names:
        parse_arm(arm)

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if probes:
        records = mem_sweep(seed, failed_probe, flash_state_shift, variants)
        (directory / "mem_sweep.json").write_text(json.dumps(records, indent=2) + "\n")
    for arm in arm_names:
        write_arm(directory, arm, seed, steps, flash_loss_shift, flash_val_loss_shift)
    return directory


# When the demo's jobs ran and on what.
DEMO_RUNS: dict[str, dict[str, str]] = {
    "job1": {"time": "2026-10-01T09:00:00Z", "gpu": "A10G"},
    "job2": {"time": "2026-10-15T09:00:00Z", "gpu": "A10G"},
    "job3": {"time": "2026-11-02T09:00:00Z", "gpu": "A10G"},
    "job4": {"time": "2026-11-09T09:00:00Z", "gpu": "H100"},
    "job5": {"time": "2026-11-16T09:00:00Z", "gpu": "H100"},
    "job6": {"time": "2026-11-23T09:00:00Z", "gpu": "H100"},
}


def demo_meta(name: str, study: str = DEFAULT_STUDY) -> dict[str, str]:
    """The ingest metadata of the demo job ``name`` of ``study``: when and where it ran, its
    library's version (job3's the regressed one, if the study has one), the study's own."""
    sample = sample_study(study)
    job = name.removeprefix(sample.job_prefix)
    version = sample.regressed_version if job == "job3" else None
    return DEMO_RUNS[job] | {sample.library: version or sample.version} | sample.meta


# The default study's demo metadata, by job name.
DEMO_META: dict[str, dict[str, str]] = {name: demo_meta(name) for name in DEMO_RUNS}


def write_demo_jobs(root: Path, steps: int = 2000, study: str = "flashoptim") -> list[Path]:
    """Write three demo jobs of ``study`` under ``root`` and return their directories in order.

    ``job1``: seed 0, all default arms, the default failed probe;
    ``job2``: seed 1, all default arms, no failed probe;
    ``job3``: seed 2, the first three arms only, flash state +0.5 B/param (a simulated
    library regression, the study's ``state_shift``). Another study's names start with its
    ``job_prefix``; ``demo_meta`` holds their ingest metadata.
    """
    root, sample = Path(root), sample_study(study)
    return [
        _demo_job(
            root,
            sample,
            seed,
            steps,
            arms=sample.arms[:3] if seed == 2 else sample.arms,
            failed_probe=None if seed == 1 else sample.failed_probe,
            flash_state_shift=sample.state_shift if seed == 2 else 0.0,
        )
        for seed in (0, 1, 2)
    ]


def write_demo_seed_jobs(root: Path, steps: int = 2000, study: str = "flashoptim") -> list[Path]:
    """Three more demo jobs, ``job4`` to ``job6`` (seeds 3 to 5, no failed probe), each with
    two seeds of the baseline and of the candidate (``seed_arms``): the pooled seeds the
    cross-job claims judge. ``demo_meta`` holds their ingest metadata."""
    root, sample = Path(root), sample_study(study)
    return [
        _demo_job(root, sample, seed, steps, arms=sample.seed_arms, failed_probe=None)
        for seed in (3, 4, 5)
    ]


def _demo_job(root: Path, sample: SampleSpec, seed: int, steps: int, **spec: Any) -> Path:
    """Demo job ``job{seed + 1}`` of ``sample``'s study (its name prefix, its probed
    variants) under ``root``; ``spec``: the arms and shifts that make it the job it is."""
    return write_sample_job(
        root / f"{sample.job_prefix}job{seed + 1}",
        seed=seed,
        steps=steps,
        probes=bool(sample.probes),
        variants=sample.probes,
        **spec,
    )
