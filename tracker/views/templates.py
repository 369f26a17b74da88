"""The pages' one Jinja2 environment. Templates are package data under ``templates/``.

Autoescaping is on for every ``.html`` template (and for strings rendered from Python), so
every value from the database is escaped where it is written. ``report.css`` and the ``.js``
files are included verbatim: they hold no value from the database.

Compiled templates are kept in Jinja2's per-user cache directory (checked against each
template's source), as Python keeps .pyc files: compiling them is a tenth of a one-job report.
"""

from __future__ import annotations

import contextlib
from functools import cache
from pathlib import Path
from urllib.parse import quote

from jinja2 import (
    Environment,
    FileSystemBytecodeCache,
    PackageLoader,
    StrictUndefined,
    select_autoescape,
)
from jinja2.bccache import Bucket

from tracker.figures.style import FONT, GRID, INK, MUTED, SURF, short_list
from tracker.views.values import (
    CLAIM_CLASS,
    JOB_COLUMNS,
    JOB_FILTERS,
    JOB_STATUSES,
    breakable,
    claim_rows,
    fmt_value,
    status_key,
)

# where the templates are, for what serves one of them as a file (``render.js``)
TEMPLATES = Path(__file__).resolve().parent / "templates"
FAVICON = "favicon.svg"


class _QuietCache(FileSystemBytecodeCache):
    """Jinja2's file cache, which gives up quietly where a compiled template cannot be kept."""

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _bytecode_cache() -> FileSystemBytecodeCache | None:
    """Jinja2's file cache; none where it cannot be kept (the templates compile anyway)."""
    try:
        return _QuietCache()
    except (OSError, RuntimeError):  # no private temporary directory for this user
        return None


@cache
def environment() -> Environment:
    """The environment every page is rendered with (one per process, templates cached)."""
    env = Environment(
        loader=PackageLoader("tracker.views", "templates"),
        autoescape=select_autoescape(("html",), default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["value"] = fmt_value
    env.filters["names"] = lambda names: short_list([str(name) for name in names])
    env.filters["claims_ordered"] = claim_rows
    env.filters["breakable"] = breakable
    env.filters["status_class"] = status_key
    env.globals.update(job_columns=JOB_COLUMNS, job_statuses=JOB_STATUSES, job_filters=JOB_FILTERS)
    env.globals.update(claim_class=CLAIM_CLASS)
    env.globals.update(ink=INK, muted=MUTED, grid=GRID, surf=SURF, font=FONT)
    # inline for the report, whose folder has no /static/; the server links its own copy
    favicon = quote((TEMPLATES / FAVICON).read_text("utf-8").strip())
    env.globals["favicon"] = f"data:image/svg+xml,{favicon}"
    return env
