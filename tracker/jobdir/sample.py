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
import math
import re
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

__all__ = [
    "DEFAULT_ARMS",
    "MODELS",
    "VARIANTS",
    "write_demo_jobs",
    "write_demo_seed_jobs",
    "write_sample_job",
]

# Parameter counts of the probed models. GPT-2 style models (vocab 50257, context 1024,
# tied embeddings): n = V*d + T*d + L*(12*d^2 + 13*d) + 2*d.
MODELS: dict[str, int] = {
    "gpt-30m": 30_339_456,  # n_layer=6, n_embd=384
    "gpt-82m": 82_056_320,  # n_layer=10, n_embd=640
    "gpt-124m": 124_439_808,  # GPT-2 small: n_layer=12, n_embd=768
    "gpt-355m": 354_823_168,  # GPT-2 medium: n_layer=24, n_embd=1024
    "resnet50": 25_557_032,  # torchvision ResNet-50
}
VARIANTS: tuple[str, ...] = ("ref", "flash", "flash_gr", "split_only", "quant_only")
DEFAULT_ARMS: tuple[str, ...] = ("ref_s0", "flash_s0", "ref_s1", "linear_s0")

TORCH_VERSION = "2.5.1+cu124"
FLASHOPTIM_VERSION = "0.1.0"
# Version reported by the probes when ``flash_state_shift`` simulates a library regression.
FLASHOPTIM_REGRESSED_VERSION = "0.1.1"
OOM_ERROR = (
    "CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 22.19 GiB total capacity; "
    "20.41 GiB already allocated; 1.12 GiB free; 20.77 GiB reserved in total by PyTorch)"
)

_MIB = 2**20
# (n_layer, n_embd) of the GPT models, for activation sizes.
_GPT_ARCH: dict[str, tuple[int, int]] = {
    "gpt-30m": (6, 384),
    "gpt-82m": (10, 640),
    "gpt-124m": (12, 768),
    "gpt-355m": (24, 1024),
}
_PROBE_TOKENS = 8 * 1024  # microbatch of the probe: 8 sequences x 1024 tokens
_VOCAB = 50_257
_RESNET_ACTIVATION_BYTES = 3.2e9  # batch 64 at 224x224, autocast

# Analytic bytes/parameter (params, optimizer state, grads) per variant.
_ANALYTIC_BPP: dict[str, tuple[float, float, float]] = {
    "ref": (4.0, 8.0, 4.0),
    "flash": (2.0, 3.125, 2.0),
    "flash_gr": (2.0, 3.125, 0.0),
    "split_only": (2.0, 4.0, 2.0),  # bf16 states: the library stores param-dtype states
    "quant_only": (4.0, 2.125, 4.0),
}
# Fixed overheads in MiB (params, state, grads) and a proportional state overhead in B/param
# (group padding of quantised states). Fixed MiB dominate on small models only.
_OVERHEAD: dict[str, tuple[tuple[float, float, float], float]] = {
    "ref": ((0.75, 1.5, 0.75), 0.0),
    "flash": ((0.5, 2.5, 0.5), 0.004),
    "flash_gr": ((0.5, 2.5, 0.25), 0.004),
    "split_only": ((0.5, 1.5, 0.5), 0.0),
    "quant_only": ((0.75, 2.5, 0.75), 0.004),
}
# Transient optimizer-step buffers (foreach temporaries) in B/param, counted in the peak.
_STEP_TEMP_BPP: dict[str, float] = {
    "ref": 4.0,
    "flash": 1.0,
    "flash_gr": 0.5,
    "split_only": 2.0,
    "quant_only": 1.5,
}

# Training arms ------------------------------------------------------------------------
_ARM_VARIANTS: tuple[str, ...] = (*VARIANTS, "linear")
_ARM_RE = re.compile(r"^(?P<variant>[a-z][a-z_]*?)_s(?P<seed>\d+)$")
_PAPER_STEPS = 20_000.0  # curves are shaped as the paper's 20k-step run, time-compressed
_VAL_LOSS: dict[str, float] = {
    "ref": 3.263,
    "flash": 3.265,
    "flash_gr": 3.265,
    "split_only": 3.264,
    "quant_only": 3.266,
}
# Optimizer-induced deviation from the ref trajectory: (end bias, smooth wiggle, white).
_OPT_DEVIATION: dict[str, tuple[float, float, float]] = {
    "ref": (0.0, 0.0, 0.0),
    "flash": (0.0025, 0.0012, 0.004),
    "flash_gr": (0.0025, 0.0012, 0.004),
    "split_only": (0.0015, 0.0010, 0.003),
    "quant_only": (0.0035, 0.0015, 0.005),
    "linear": (0.0040, 0.0020, 0.006),
}
_STEP_MS: dict[str, float] = {
    "ref": 300.0,
    "flash": 292.0,
    "flash_gr": 295.0,
    "split_only": 288.0,
    "quant_only": 286.0,
    "linear": 291.0,
}
_LR_MAX = 6e-4
_LR_MIN = 6e-5


def _rng(seed: int, *labels: str | int) -> np.random.Generator:
    """A generator keyed by the job seed and a stable label (CRC32, not ``hash()``)."""
    key = zlib.crc32("/".join(str(label) for label in labels).encode("utf-8"))
    return np.random.default_rng(np.random.SeedSequence([seed, key]))


def _alloc(nbytes: float, granularity: int = 512) -> int:
    """Round a byte count up to the CUDA caching allocator's granularity."""
    return math.ceil(nbytes / granularity) * granularity


def _activation_bytes(model: str) -> float:
    if model in _GPT_ARCH:
        n_layer, n_embd = _GPT_ARCH[model]
        # 34*s*b*h bytes per layer (flash attention, bf16 autocast) + fp32 logits
        return 34.0 * _PROBE_TOKENS * n_embd * n_layer + 4.0 * _PROBE_TOKENS * _VOCAB
    return _RESNET_ACTIVATION_BYTES


def _probe_record(seed: int, model: str, variant: str, flash_state_shift: float) -> dict:
    n = MODELS[model]
    rng = _rng(seed, "mem", model, variant)
    (fixed_p, fixed_s, fixed_g), rel_state = _OVERHEAD[variant]
    fixed = np.array([fixed_p, fixed_s, fixed_g]) * _MIB
    fixed = fixed * np.clip(1.0 + 0.1 * rng.standard_normal(3), 0.5, None)
    rel = rel_state * (1.0 + 0.05 * rng.standard_normal()) * n
    analytic = np.array(_ANALYTIC_BPP[variant]) * n
    params_bytes = _alloc(analytic[0] + fixed[0])
    state_bytes = _alloc(analytic[1] + fixed[1] + rel)
    grads_bytes = _alloc(analytic[2] + fixed[2])

    shift = flash_state_shift if variant == "flash" else 0.0
    bpp_params = params_bytes / n
    bpp_state = state_bytes / n + shift
    bpp_grads = grads_bytes / n
    state_bytes += round(shift * n)

    activations = _activation_bytes(model) * (1.0 + 0.01 * rng.standard_normal())
    workspace = (64 + 16 * rng.random()) * _MIB  # cuBLAS workspace, allocator slack
    peak = params_bytes + state_bytes + grads_bytes + activations + workspace
    peak += _STEP_TEMP_BPP[variant] * n
    peak_steady = _alloc(peak, 2 * _MIB)

    version = FLASHOPTIM_REGRESSED_VERSION if flash_state_shift != 0.0 else FLASHOPTIM_VERSION
    return {
        "model": model,
        "variant": variant,
        "n_params": n,
        "bpp_params": bpp_params,
        "bpp_state": bpp_state,
        "bpp_grads": bpp_grads,
        "bpp_params_state_grads": bpp_params + bpp_state + bpp_grads,
        "peak_steady": peak_steady,
        "params_bytes": params_bytes,
        "state_bytes": state_bytes,
        "grads_bytes": grads_bytes,
        "torch_version": TORCH_VERSION,
        "flashoptim_version": version,
    }


def _mem_sweep(
    seed: int, failed_probe: tuple[str, str] | None, flash_state_shift: float
) -> list[dict]:
    records: list[dict] = []
    for model in MODELS:
        for variant in VARIANTS:
            if failed_probe is not None and (model, variant) == tuple(failed_probe):
                records.append({"model": model, "variant": variant, "error": OOM_ERROR})
            else:
                records.append(_probe_record(seed, model, variant, flash_state_shift))
    return records


def _parse_arm(arm: str) -> tuple[str, int]:
    match = _ARM_RE.match(arm)
    if match is None or match["variant"] not in _ARM_VARIANTS:
        raise ValueError(
            f"invalid arm name {arm!r}: expected <variant>_s<seed> with variant in "
            f"{', '.join(_ARM_VARIANTS)}"
        )
    return match["variant"], int(match["seed"])


def _smooth(rng: np.random.Generator, u: np.ndarray, n_waves: int = 4) -> np.ndarray:
    """Slow, unit-scale random wiggle over the normalised time ``u`` in [0, 1]."""
    freqs = rng.uniform(0.5, 6.0, n_waves)
    phases = rng.uniform(0.0, 2.0 * np.pi, n_waves)
    weights = rng.standard_normal(n_waves)
    waves = np.sin(2.0 * np.pi * np.outer(u, freqs) + phases) @ weights
    return waves / math.sqrt(n_waves / 2.0)


def _lr_schedule(steps: int) -> np.ndarray:
    t = np.arange(steps, dtype=np.float64)
    warmup = max(1, round(0.035 * steps))
    decay = max(1, steps - warmup)
    progress = np.clip((t - warmup) / decay, 0.0, 1.0)
    cosine = _LR_MIN + 0.5 * (_LR_MAX - _LR_MIN) * (1.0 + np.cos(np.pi * progress))
    return np.where(t < warmup, _LR_MAX * (t + 1.0) / warmup, cosine)


def _loss_curve(seed: int, variant: str, arm_seed: int, steps: int) -> np.ndarray:
    t = np.arange(steps, dtype=np.float64)
    u = t / max(1, steps - 1)
    s = t * (_PAPER_STEPS / steps)
    # fast initial drop + power-law decay: 10.9 at step 0, ~3.3 at the end
    base = 2.9 + 4.0 * (1.0 + s / 440.0) ** -0.6 + 4.0 * np.exp(-s / 150.0)

    # init + data order: shared by every variant trained with the same seed
    init_rng = _rng(seed, "init", arm_seed)
    init = (0.006 + 0.05 * np.exp(-s / 500.0)) * _smooth(init_rng, u)
    data_rng = _rng(seed, "data", arm_seed)
    data = 0.8 * 0.03 * np.sqrt(base / 3.3) * data_rng.standard_t(8, steps)

    # optimizer-specific deviation from the ref trajectory
    bias, wiggle, white = _OPT_DEVIATION[variant]
    loss = base + init + data
    if bias or wiggle or white:
        opt_rng = _rng(seed, "opt", variant, arm_seed)
        loss += bias * (1.0 - np.exp(-3.0 * u)) + wiggle * _smooth(opt_rng, u)
        loss += white * opt_rng.standard_normal(steps)

    if variant == "linear":
        div_rng = _rng(seed, "diverge", arm_seed)
        start = int(steps * (0.4 + 0.01 * div_rng.uniform(-1.0, 1.0)))
        rise = max(2, round(0.05 * steps))
        n_inf = max(1, round(0.002 * steps))
        j = np.arange(steps) - start
        rising = (j >= 0) & (j < rise)
        growth = math.log1p(2e4 / 0.05)
        loss = np.where(rising, loss + 0.05 * np.expm1(growth * j / rise), loss)
        loss = np.where((j >= rise) & (j < rise + n_inf), np.inf, loss)
        loss = np.where(j >= rise + n_inf, np.nan, loss)
    return loss


def _step_ms(seed: int, variant: str, arm_seed: int, steps: int) -> np.ndarray:
    rng = _rng(seed, "timing", variant, arm_seed)
    ms = _STEP_MS[variant] + 4.0 * rng.standard_normal(steps)
    spikes = rng.random(steps) < 0.004  # eval / checkpoint / dataloader hiccups
    ms = ms + spikes * rng.uniform(40.0, 200.0, steps)
    ms[0] = _STEP_MS[variant] * 25.0  # torch.compile on the first step
    if steps > 1:
        ms[1] += 0.5 * _STEP_MS[variant]
    return np.round(ms, 2)


def _write_arm(
    directory: Path, arm: str, seed: int, steps: int, loss_shift: float, val_loss_shift: float
) -> None:
    variant, arm_seed = _parse_arm(arm)
    loss = _loss_curve(seed, variant, arm_seed, steps)
    if variant == "flash" and loss_shift:
        loss = loss + loss_shift
    step_ms = _step_ms(seed, variant, arm_seed, steps)
    frame = pl.DataFrame(
        {
            "step": np.arange(steps, dtype=np.int64),
            "loss": loss,
            "lr": _lr_schedule(steps),
            "step_ms": step_ms,
        }
    ).with_columns(
        pl.col("loss").round_sig_figs(6).cast(pl.String).str.replace("NaN", "nan", literal=True),
        pl.col("lr").round_sig_figs(6),
    )
    frame.write_csv(directory / f"{arm}.csv")

    tail = loss[-max(1, steps // 100) :]
    final_loss = float(np.mean(tail))
    diverged = not math.isfinite(final_loss)
    val_loss: float | None = None
    if not diverged:
        seed_noise = 0.0008 * _rng(seed, "val", arm_seed).standard_normal()
        own_noise = 0.0004 * _rng(seed, "val", variant, arm_seed).standard_normal()
        shift = val_loss_shift if variant == "flash" else 0.0
        val_loss = round(_VAL_LOSS[variant] + seed_noise + own_noise + shift, 6)
        final_loss = round(final_loss, 6)
    summary = {
        "val_loss": val_loss,
        "final_loss": final_loss,
        "diverged": diverged,
        "seed": arm_seed,
        "steps": steps,
        "wall_time_s": round(float(step_ms.sum()) / 1000.0 * 1.02, 2),
        "model": "gpt-124m",
    }
    (directory / f"{arm}.json").write_text(json.dumps(summary, indent=2) + "\n")


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
) -> Path:
    """Write a realistic sample job directory and return it.

    Args:
        directory: created if missing; existing files of the same name are overwritten.
        seed: job seed (>= 0); the same arguments always give byte-identical files.
        steps: rows per training-arm CSV (steps 0..steps-1).
        arms: training arms ``<variant>_s<seed>`` (variant in VARIANTS or ``linear``).
        probes: write ``mem_sweep.json`` (one record per model x variant).
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
        failed_probe[0] not in MODELS or failed_probe[1] not in VARIANTS
    ):
        raise ValueError(f"unknown failed_probe {failed_probe!r}")
    arm_names = list(dict.fromkeys(arms))
    for arm in arm_names:
        _parse_arm(arm)

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if probes:
        records = _mem_sweep(seed, failed_probe, flash_state_shift)
        (directory / "mem_sweep.json").write_text(json.dumps(records, indent=2) + "\n")
    for arm in arm_names:
        _write_arm(directory, arm, seed, steps, flash_loss_shift, flash_val_loss_shift)
    return directory


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


def write_demo_jobs(root: Path, steps: int = 2000) -> list[Path]:
    """Write three demo jobs under ``root`` and return their directories in order.

    ``job1``: seed 0, all default arms, the default failed probe;
    ``job2``: seed 1, all default arms, no failed probe;
    ``job3``: seed 2, arms ref_s0/flash_s0/ref_s1 only, flash state +0.5 B/param (a
    simulated library regression). ``DEMO_META`` holds their ingest metadata.
    """
    root = Path(root)
    return [
        write_sample_job(root / "job1", seed=0, steps=steps),
        write_sample_job(root / "job2", seed=1, steps=steps, failed_probe=None),
        write_sample_job(
            root / "job3",
            seed=2,
            steps=steps,
            arms=("ref_s0", "flash_s0", "ref_s1"),
            flash_state_shift=0.5,
        ),
    ]


def write_demo_seed_jobs(root: Path, steps: int = 2000) -> list[Path]:
    """Three more demo jobs, ``job4`` to ``job6`` (seeds 3 to 5, no failed probe), each with
    two seeds of the baseline and of the candidate (``SEED_JOB_ARMS``): the pooled seeds the
    cross-job claims judge. ``DEMO_META`` holds their ingest metadata."""
    root = Path(root)
    return [
        write_sample_job(
            root / f"job{seed + 1}", seed=seed, steps=steps, arms=SEED_JOB_ARMS, failed_probe=None
        )
        for seed in (3, 4, 5)
    ]
