"""The study's arm names, as the kept drawings order and split them."""

from __future__ import annotations

from tracker.domain import ArmName

# The study's four training arms, in the order its figures list them.
STUDY_ARMS = ("ref_s0", "flash_s0", "ref_s1", "linear_s0")


def split_arm(arm: str) -> tuple[str, int | None]:
    """``"flash_s0"`` -> ``("flash", 0)``; a name without a seed suffix -> ``(arm, None)``."""
    name = ArmName.find(arm)
    if name is None:
        return arm, None
    return name.variant, name.seed
