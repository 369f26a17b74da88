"""The checks a verdict can be of, and their words: the one home of their names.

Every module that makes, groups or draws verdicts names a check through ``Check``, never by a
string of its own, so that renaming one fails at import (a missing member), not silently
as a verdict no claim, gate or figure reads any more. ``Check`` is a ``StrEnum``: each
member compares equal to (and is stored as) its text.
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType

__all__ = ["BPP", "CLAIM_OF", "GPT2_124M", "TABLE4", "TABLE4_LABELS", "Check"]


class Check(StrEnum):
    """A verdict's check (``Verdict.check``)."""

    BPP_PARAMS = "bpp_params"  # bytes/param of each probe against the analytic value
    BPP_STATE = "bpp_state"
    BPP_GRADS = "bpp_grads"
    TABLE4_PARAMS_GIB = "table4_params_gib"  # extrapolated GiB against the paper's Table 4
    TABLE4_OPTIM_GIB = "table4_optim_gib"
    GPT2_124M_PARAMS_GIB = "gpt2_124m_params_gib"  # GiB of GPT-2 124M against the appendix
    GPT2_124M_OPTIM_GIB = "gpt2_124m_optim_gib"
    PROBE_FAILED = "probe_failed"
    EMA_DELTA_VS_SEED_NOISE = "ema_delta_vs_seed_noise"  # the candidate tracks the baseline
    DIVERGED = "diverged"
    VAL_LOSS = "val_loss"  # candidate minus baseline of the same seed
    VAL_LOSS_PAPER = "val_loss_paper"  # the paper's final validation loss


# Per probe component (params, state, grads): its bytes/param check.
BPP = MappingProxyType(
    {"params": Check.BPP_PARAMS, "state": Check.BPP_STATE, "grads": Check.BPP_GRADS}
)
# Per part of a paper's GiB row (params, optim): the check against Table 4 / the appendix.
TABLE4 = MappingProxyType({"params": Check.TABLE4_PARAMS_GIB, "optim": Check.TABLE4_OPTIM_GIB})
GPT2_124M = MappingProxyType(
    {"params": Check.GPT2_124M_PARAMS_GIB, "optim": Check.GPT2_124M_OPTIM_GIB}
)
# The paper's table labels of the Table 4 figure's panels.
TABLE4_LABELS = MappingProxyType(
    {Check.TABLE4_PARAMS_GIB: "Parameters (GiB)", Check.TABLE4_OPTIM_GIB: "Optimizer state (GiB)"}
)
# The per-job checks judged job by job across jobs, and the claim each one feeds.
CLAIM_OF = MappingProxyType(
    {
        Check.BPP_PARAMS: "bpp_params",
        Check.BPP_STATE: "bpp_state",
        Check.BPP_GRADS: "bpp_grads",
        Check.TABLE4_PARAMS_GIB: "table4_params",
        Check.TABLE4_OPTIM_GIB: "table4_optim",
        Check.GPT2_124M_PARAMS_GIB: "gpt2_124m_params",
        Check.GPT2_124M_OPTIM_GIB: "gpt2_124m_optim",
    }
)
