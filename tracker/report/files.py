"""The report folder's own files and how a file is written into it."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

PLOTLY_JS = "plotly.min.js"
INDEX = "index.html"
MANIFEST = "manifest.json"
CLAIMS = "claims.json"
RESERVED = {INDEX, PLOTLY_JS, MANIFEST, CLAIMS}


def job_folders(names: list[str]) -> dict[str, str]:
    """Folder per job: its name, unless reserved or equal to another's on a case-blind disk.

    Job names are ``[A-Za-z0-9._-]`` (checked at ingest); ``+`` never occurs in one, so a
    suffixed folder cannot collide with another job's.
    """
    taken: set[str] = {name.casefold() for name in RESERVED}
    folders = {}
    for name in names:
        folder, n = name, 1
        while folder.casefold() in taken:
            n += 1
            folder = f"{name}+{n}"
        taken.add(folder.casefold())
        folders[name] = folder
    return folders


def write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def write_if_changed(path: Path, data: bytes) -> None:
    """Rewritten only when absent or different (plotly.min.js is 4-5 MB)."""
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def plotly_js() -> bytes:
    """The plotly.js bundled with plotly.py, read without importing plotly."""
    spec = importlib.util.find_spec("plotly")
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    return (package / "package_data" / PLOTLY_JS).read_bytes()
