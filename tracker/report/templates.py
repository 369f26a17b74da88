"""The report's one Jinja2 environment. Templates are package data under ``templates/``.

Autoescaping is on for every ``.html`` template (and for strings rendered from Python), so
every value from the database is escaped where it is written. ``report.css`` and the ``.js``
files are included verbatim: they hold no value from the database.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from tracker.report.values import fmt_value

if TYPE_CHECKING:
    from jinja2 import Environment


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
    )
    env.filters["value"] = fmt_value
    env.filters["names"] = lambda names: short_list([str(name) for name in names])
    env.globals.update(ink=INK, muted=MUTED, grid=GRID, surf=SURF, font=FONT)
    return env
