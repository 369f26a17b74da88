"""``manifest.json``: what each job's pages were made from (their key), and the cross-job
data kept from them (verdict counts, notes, smoothed curves on a grid).

A job's key is the digest of its content, its metadata, the expectations (their values and
the file they came from), the tracker's version and its folder: pages whose key is unchanged
are kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tracker
from tracker.analysis.expectations import Expectations
from tracker.report.files import INDEX, MANIFEST, write_if_changed
from tracker.summary.version import expectations_digest

# Bump when the manifest's entries change shape (2: smoothed curves as base64 float32)
MANIFEST_FORMAT = 2

Entry = dict[str, Any]


def digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()


def expectations_key(exp: Expectations) -> str:
    """The expectations' values, and the file they came from (the job pages name it)."""
    return digest(expectations_digest(exp), exp.source)


def page_key(content: str, meta: Mapping[str, str], exp_key: str, folder: str) -> str:
    """What a job's pages are made from: they are rendered again when it changes."""
    meta_text = json.dumps(sorted(meta.items()))
    return digest(content, meta_text, exp_key, tracker.__version__, folder)


def read_manifest(out_dir: Path) -> dict[str, Any]:
    """The manifest an earlier report left in ``out_dir``; empty when none can be read."""
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("jobs"), dict) else {}


def kept_entries(
    manifest: Mapping[str, Any],
    keys: Mapping[str, str],
    folders: Mapping[str, str],
    out_dir: Path,
    *,
    force: bool = False,
) -> dict[str, Entry]:
    """The jobs whose pages are up to date (same key, page present), with their entries.

    Entries in another format cannot be read back: their jobs are rendered again.
    """
    previous = manifest.get("jobs", {})
    if manifest.get("format") != MANIFEST_FORMAT or force:
        previous = {}
    return {
        name: previous[name]
        for name in keys
        if isinstance(previous.get(name), dict)
        and previous[name].get("key") == keys[name]
        and (out_dir / folders[name] / INDEX).is_file()
    }


def write_manifest(out_dir: Path, exp_key: str, entries: Mapping[str, Entry]) -> None:
    manifest = {
        "format": MANIFEST_FORMAT,
        "tracker": tracker.__version__,
        "expectations": exp_key,
        "jobs": entries,
    }
    write_if_changed(out_dir / MANIFEST, json.dumps(manifest, separators=(",", ":")).encode())
