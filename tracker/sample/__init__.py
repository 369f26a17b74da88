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

Everything is a pure function of the arguments: the same arguments give byte-identical
files. Randomness comes from ``numpy.random.default_rng`` seeded with the job seed and a
CRC32 of a stable label (never Python's ``hash()``), so each record and each arm is
independent of which other records or arms are written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tracker.errors import NoSampleJobs, known_names
from tracker.sample.arms import parse_arm, write_arm
from tracker.sample.probes import (
    ADAM8BIT_VARIANTS,
    FLASHOPTIM_REGRESSED_VERSION,
    FLASHOPTIM_VERSION,
    MODELS,
    OOM_ERROR,
    TORCH_VERSION,
    VARIANTS,
    mem_sweep,
)

__all__ = [
    "DEFAULT_ARMS",
    "DEMO_META",
    "FLASHOPTIM_REGRESSED_VERSION",
    "FLASHOPTIM_VERSION",
    "MODELS",
    "OOM_ERROR",
    "SAMPLE_STUDIES",
    "SEED_JOB_ARMS",
    "TORCH_VERSION",
    "VARIANTS",
    "SampleStudy",
    "demo_meta",
    "write_demo_jobs",
    "write_demo_seed_jobs",
    "write_sample_job",
]

DEFAULT_ARMS: tuple[str, ...] = ("ref_s0", "flash_s0", "ref_s1", "linear_s0")


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
        arms: training arms ``<variant>_s<seed>`` (variant in VARIANTS or ``linear``).
        probes: write ``mem_sweep.json`` (one record per model x variant).
        variants: the probed variants (``VARIANTS``, or the 8-bit Adam study's).
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


@dataclass(frozen=True)
class SampleStudy:
    """What a study's sample jobs hold: its probed variants and its arms (``arms``: the
    default job's, the baseline first; ``seed_arms``: two seeds of baseline and candidate)."""

    variants: tuple[str, ...]
    arms: tuple[str, ...]
    seed_arms: tuple[str, ...]
    failed_probe: tuple[str, str]
    library: str  # the metadata key of the optimizer library's version
    version: str  # its value in every demo job
    job_prefix: str  # before "job1" .. "job6": the demo's job names


# Metadata the demo gives each job at ingest: when it ran, on what, with which library.
DEMO_META: dict[str, dict[str, str]] = {
    "job1": {"time": "2026-10-01T09:00:00Z", "gpu": "A10G", "flashoptim": "0.1.0"},
    "job2": {"time": "2026-10-15T09:00:00Z", "gpu": "A10G", "flashoptim": "0.1.0"},
    "job3": {"time": "2026-11-02T09:00:00Z", "gpu": "A10G", "flashoptim": "0.1.1"},
    "job4": {"time": "2026-11-09T09:00:00Z", "gpu": "H100", "flashoptim": "0.1.0"},
    "job5": {"time": "2026-11-16T09:00:00Z", "gpu": "H100", "flashoptim": "0.1.0"},
    "job6": {"time": "2026-11-23T09:00:00Z", "gpu": "H100", "flashoptim": "0.1.0"},
}
# Arms of the demo's seed jobs: two seeds of the baseline and of the candidate.
SEED_JOB_ARMS = ("ref_s0", "ref_s1", "flash_s0", "flash_s1", "linear_s0")
SAMPLE_STUDIES: dict[str, SampleStudy] = {
    "flashoptim": SampleStudy(
        VARIANTS, DEFAULT_ARMS, SEED_JOB_ARMS, ("gpt-355m", "ref"), "flashoptim", "", ""
    ),
    "adam8bit": SampleStudy(
        ADAM8BIT_VARIANTS,
        ("adam32_s0", "adam8bit_s0", "adam32_s1", "adam8lin_s0"),
        ("adam32_s0", "adam32_s1", "adam8bit_s0", "adam8bit_s1", "adam8lin_s0"),
        ("gpt-355m", "adam32"),
        "bitsandbytes",
        "0.43.1",
        "adam8bit-",
    ),
}


def sample_study(study: str) -> SampleStudy:
    """The sample jobs' parameters of ``study``; ``NoSampleJobs`` when it has none."""
    if study not in SAMPLE_STUDIES:
        raise NoSampleJobs(study=study, known=known_names(SAMPLE_STUDIES))
    return SAMPLE_STUDIES[study]


def demo_meta(name: str) -> dict[str, str]:
    """The ingest metadata of the demo job ``name``: ``DEMO_META``'s, another study's job with
    its own library's version."""
    if name in DEMO_META:
        return DEMO_META[name]
    for study in SAMPLE_STUDIES.values():
        if study.job_prefix and name.startswith(study.job_prefix):
            meta = DEMO_META[name.removeprefix(study.job_prefix)]
            return {"time": meta["time"], "gpu": meta["gpu"], study.library: study.version}
    raise KeyError(name)


def write_demo_jobs(root: Path, steps: int = 2000, study: str = "flashoptim") -> list[Path]:
    """Write three demo jobs of ``study`` under ``root`` and return their directories in order.

    ``job1``: seed 0, all default arms, the default failed probe;
    ``job2``: seed 1, all default arms, no failed probe;
    ``job3``: seed 2, the first three arms only, flash state +0.5 B/param (a simulated
    library regression, in the flashoptim study). Another study's names start with its
    ``job_prefix``; ``demo_meta`` holds their ingest metadata.
    """
    root, sample = Path(root), sample_study(study)
    shift = 0.5 if study == "flashoptim" else 0.0
    return [
        write_sample_job(
            root / f"{sample.job_prefix}job{seed + 1}",
            seed=seed,
            steps=steps,
            arms=sample.arms[:3] if seed == 2 else sample.arms,
            failed_probe=None if seed == 1 else sample.failed_probe,
            flash_state_shift=shift if seed == 2 else 0.0,
            variants=sample.variants,
        )
        for seed in (0, 1, 2)
    ]


def write_demo_seed_jobs(root: Path, steps: int = 2000, study: str = "flashoptim") -> list[Path]:
    """Three more demo jobs, ``job4`` to ``job6`` (seeds 3 to 5, no failed probe), each with
    two seeds of the baseline and of the candidate (``seed_arms``): the pooled seeds the
    cross-job claims judge. ``demo_meta`` holds their ingest metadata."""
    root, sample = Path(root), sample_study(study)
    return [
        write_sample_job(
            root / f"{sample.job_prefix}job{seed + 1}",
            seed=seed,
            steps=steps,
            arms=sample.seed_arms,
            failed_probe=None,
            variants=sample.variants,
        )
        for seed in (3, 4, 5)
    ]
