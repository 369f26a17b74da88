"""The sample job's training arms: ``<variant>_s<seed>.csv`` loss curves shaped like GPT-2
124M's and their summary JSONs (see ``tracker.sample``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl

from tracker.domain import DEFAULT_ARM_MODEL, LOSS, ArmName
from tracker.sample.probes import stable_rng
from tracker.sample.study import sample_variants

__all__ = ["parse_arm", "write_arm"]

_PAPER_STEPS = 20_000.0  # curves are shaped as the paper's 20k-step run, time-compressed
_LR_MAX = 6e-4
_LR_MIN = 6e-5


def parse_arm(arm: str) -> tuple[str, int]:
    """Variant and seed of a sample arm: an arm name (``ArmName``) of a variant it can write."""
    name = ArmName.find(arm)
    if name is None or name.variant not in sample_variants():
        raise ValueError(
            f"invalid arm name {arm!r}: expected <variant>_s<seed> with variant in "
            f"{', '.join(sample_variants())}"
        )
    return name.variant, name.seed


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
    init_rng = stable_rng(seed, "init", arm_seed)
    init = (0.006 + 0.05 * np.exp(-s / 500.0)) * _smooth(init_rng, u)
    data_rng = stable_rng(seed, "data", arm_seed)
    data = 0.8 * 0.03 * np.sqrt(base / 3.3) * data_rng.standard_t(8, steps)

    # optimizer-specific deviation from the ref trajectory
    spec = sample_variants()[variant]
    bias, wiggle, white = spec.deviation
    loss = base + init + data
    if bias or wiggle or white:
        opt_rng = stable_rng(seed, "opt", variant, arm_seed)
        loss += bias * (1.0 - np.exp(-3.0 * u)) + wiggle * _smooth(opt_rng, u)
        loss += white * opt_rng.standard_normal(steps)

    if spec.diverges:
        div_rng = stable_rng(seed, "diverge", arm_seed)
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
    rng = stable_rng(seed, "timing", variant, arm_seed)
    step_ms = sample_variants()[variant].step_ms
    ms = step_ms + 4.0 * rng.standard_normal(steps)
    spikes = rng.random(steps) < 0.004  # eval / checkpoint / dataloader hiccups
    ms = ms + spikes * rng.uniform(40.0, 200.0, steps)
    ms[0] = step_ms * 25.0  # torch.compile on the first step
    if steps > 1:
        ms[1] += 0.5 * step_ms
    return np.round(ms, 2)


def write_arm(
    directory: Path, arm: str, seed: int, steps: int, loss_shift: float, val_loss_shift: float
) -> None:
    variant, arm_seed = parse_arm(arm)
    loss = _loss_curve(seed, variant, arm_seed, steps)
    if variant == "flash" and loss_shift:
        loss = loss + loss_shift
    step_ms = _step_ms(seed, variant, arm_seed, steps)
    frame = pl.DataFrame(
        {
            "step": np.arange(steps, dtype=np.int64),
            LOSS: loss,
            "lr": _lr_schedule(steps),
            "step_ms": step_ms,
        }
    ).with_columns(
        pl.col(LOSS).round_sig_figs(6).cast(pl.String).str.replace("NaN", "nan", literal=True),
        pl.col("lr").round_sig_figs(6),
    )
    frame.write_csv(directory / f"{arm}.csv")

    tail = loss[-max(1, steps // 100) :]
    final_loss = float(np.mean(tail))
    diverged = not math.isfinite(final_loss)
    val_loss: float | None = None
    if not diverged:
        seed_noise = 0.0008 * stable_rng(seed, "val", arm_seed).standard_normal()
        own_noise = 0.0004 * stable_rng(seed, "val", variant, arm_seed).standard_normal()
        shift = val_loss_shift if variant == "flash" else 0.0
        mean = sample_variants()[variant].val_loss or 0.0
        val_loss = round(mean + seed_noise + own_noise + shift, 6)
        final_loss = round(final_loss, 6)
    summary = {
        "val_loss": val_loss,
        "final_loss": final_loss,
        "diverged": diverged,
        "seed": arm_seed,
        "steps": steps,
        "wall_time_s": round(float(step_ms.sum()) / 1000.0 * 1.02, 2),
        "model": DEFAULT_ARM_MODEL,
    }
    (directory / f"{arm}.json").write_text(json.dumps(summary, indent=2) + "\n")
