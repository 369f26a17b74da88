"""Arm names as the kept drawings split them (the arms' roles are each study's, in its
file's ``[training]``)."""

from __future__ import annotations

from tracker.domain import ArmName


def split_arm(arm: str) -> tuple[str, int | None]:
    """``"flash_s0"`` -> ``("flash", 0)``; a name without a seed suffix -> ``(arm, None)``."""
    name = ArmName.find(arm)
    if name is None:
        return arm, None
    return name.variant, name.seed
