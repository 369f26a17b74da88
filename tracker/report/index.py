"""The report's index: each job's entry from its page (rendered now or kept from an earlier
report), the index built as the server's home page is (``tracker.views.home``), written."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tracker.jsonio import to_json
from tracker.report.files import CLAIMS, INDEX, PLOTLY_JS, plotly_js, write_if_changed, write_text
from tracker.summary.grid import GridCurve
from tracker.views.across_jobs import job_href
from tracker.views.home import IndexEntry
from tracker.views.pages import IndexView, index_page

CLAIMS_NONE = "No claim could be judged: no job of this report has what they need."


def index_entries(
    folders: Mapping[str, str], entries: Mapping[str, Mapping[str, Any]]
) -> dict[str, IndexEntry]:
    """The index's entry of each job, from its manifest entry."""
    return {
        name: IndexEntry(
            href=job_href(folders, name),
            folder=folders[name],
            tally=entries[name]["tally"],
            probes=entries[name]["probes"],
            arms=entries[name]["arms"],
            curves={arm: GridCurve.from_json(doc) for arm, doc in entries[name]["curves"].items()},
        )
        for name in folders
    }


def write_index(out_dir: Path, view: IndexView, generated: str, source: str) -> Path:
    """plotly.js and ``claims.json`` (each when changed), then ``index.html``."""
    write_if_changed(out_dir / PLOTLY_JS, plotly_js())
    write_if_changed(out_dir / CLAIMS, (to_json(list(view.claims)) + "\n").encode("utf-8"))
    index = out_dir / INDEX
    write_text(index, index_page(view, generated, source, plotly_src=PLOTLY_JS))
    return index
