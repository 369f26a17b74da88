"""Removing the folders an earlier report wrote for jobs this one no longer holds."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tracker.report.files import RESERVED


def remove_folder(out_dir: Path, folder: object) -> bool:
    """Remove a job folder an earlier report wrote (only a plain name directly in DIR)."""
    if not isinstance(folder, str) or folder in RESERVED or Path(folder).name != folder:
        return False
    path = out_dir / folder
    if folder in {"", ".", ".."} or not path.is_dir() or path.is_symlink():
        return False
    shutil.rmtree(path)
    return True


def remove_unused(out_dir: Path, earlier: Mapping[str, Any], in_use: Iterable[str]) -> list[str]:
    """The folders of an earlier report's entries (``earlier``: its manifest's jobs) that no
    job of this one uses, removed; their names."""
    removed = []
    used = set(in_use)
    for old in earlier.values():
        folder = old.get("folder") if isinstance(old, dict) else None
        if folder not in used and remove_folder(out_dir, folder):
            removed.append(str(folder))
    return removed
