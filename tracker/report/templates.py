"""The report's one Jinja2 environment. Templates are package data under ``templates/``.

Autoescaping is on for every ``.html`` template (and for strings rendered from Python), so
every value from the database is escaped where it is written. ``report.css`` and the ``.js``
files are included verbatim: they hold no value from the database.

Compiled templates are kept in Jinja2's per-user cache directory (checked against each
template's source), as Python keeps .pyc files: compiling them is a tenth of a one-job report.
"""

from __future__ import annotations

import contextlib
from functools import cache
from typing import TYPE_CHECKING

from tracker.report.values import fmt_value

if TYPE_CHECKING:
    from jinja2 import BytecodeCache, Environment


def _bytecode_cache() -> BytecodeCache | None:
    """Jinja2's file cache; none where it cannot be kept (the templates compile anyway)."""
    from jinja2 import FileSystemBytecodeCache
    from jinja2.bccache import Bucket

    class QuietCache(FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: Bucket) -> None:
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    try:
        return QuietCache()
    except (OSError, RuntimeError):  # no private temporary directory for this user
        return None


@cache
def environment() -> Environment:
    """The environment every page is rendered with (one per process, templates cached)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    from tracker.figures.style import FONT, GRID, INK, MUTED, SURF, short_list

    env = Environment(
        loader=PackageLoader("tracker.report", "templates"),
        autoescape=select_autoescape(("html",), default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["value"] = fmt_value
    env.filters["names"] = lambda names: short_list([str(name) for name in names])
    env.globals.update(ink=INK, muted=MUTED, grid=GRID, surf=SURF, font=FONT)
    return env
