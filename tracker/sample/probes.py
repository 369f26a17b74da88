"""The sample job's memory probes: one ``mem_sweep.json`` record per (model, variant), close to
the analytic bytes/parameter of each variant plus fixed overheads, as its study's
``[sample.variants]`` give them (see ``tracker.sample``).
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from tracker.sample.study import sample_variants

__all__ = ["MODELS", "OOM_ERROR", "mem_sweep", "stable_rng"]

# Parameter counts of the probed models. GPT-2 style models (vocab 50257, context 1024,
# tied embeddings): n = V*d + T*d + L*(12*d^2 + 13*d) + 2*d.
MODELS: dict[str, int] = {
    "gpt-30m": 30_339_456,  # n_layer=6, n_embd=384
    "gpt-82m": 82_056_320,  # n_layer=10, n_embd=640
    "gpt-124m": 124_439_808,  # GPT-2 small: n_layer=12, n_embd=768
    "gpt-355m": 354_823_168,  # GPT-2 medium: n_layer=24, n_embd=1024
    "resnet50": 25_557_032,  # torchvision ResNet-50
}

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


def stable_rng(seed: int, *labels: str | int) -> np.random.Generator:
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
    gen = stable_rng(seed, "mem", model, variant)
    spec = sample_variants()[variant]
    fixed = np.array(spec.overhead_mib) * _MIB
    fixed = fixed * np.clip(1.0 + 0.1 * gen.standard_normal(3), 0.5, None)
    rel = spec.overhead_bpp * (1.0 + 0.05 * gen.standard_normal()) * n
    analytic = np.array(spec.bpp or (0.0, 0.0, 0.0)) * n
    params_bytes = _alloc(analytic[0] + fixed[0])
    state_bytes = _alloc(analytic[1] + fixed[1] + rel)
    grads_bytes = _alloc(analytic[2] + fixed[2])

    shift = flash_state_shift if variant == "flash" else 0.0
    bpp_params = params_bytes / n
    bpp_state = state_bytes / n + shift
    bpp_grads = grads_bytes / n
    state_bytes += round(shift * n)

    activations = _activation_bytes(model) * (1.0 + 0.01 * gen.standard_normal())
    workspace = (64 + 16 * gen.random()) * _MIB  # cuBLAS workspace, allocator slack
    peak = params_bytes + state_bytes + grads_bytes + activations + workspace
    peak += spec.step_temp_bpp * n
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


def mem_sweep(
    seed: int,
    failed_probe: tuple[str, str] | None,
    flash_state_shift: float,
    variants: tuple[str, ...],
) -> list[dict]:
    records: list[dict] = []
    for model in MODELS:
        for variant in variants:
            if failed_probe is not None and (model, variant) == tuple(failed_probe):
                records.append({"model": model, "variant": variant, "error": OOM_ERROR})
            else:
                records.append(_probe_record(seed, model, variant, flash_state_shift))
    return records
