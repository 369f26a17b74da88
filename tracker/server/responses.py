"""JSON as ``--format json`` writes it (``tracker.jsonio``'s API policy: NaN "NaN", +-inf
"Infinity"/"-Infinity", null for missing), and HTML from templates."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from fastapi.responses import HTMLResponse, JSONResponse

from tracker.jsonio import to_api_json
from tracker.server.page_cache import job_href
from tracker.views.templates import environment

if TYPE_CHECKING:
    import polars as pl
    from fastapi import Request

TEMPLATES = Path(__file__).parent / "templates"
FAVICON_PATH = "/static/favicon.svg"


class TrackerJSON(JSONResponse):
    """Strict JSON: a non-finite number can never slip through as ``NaN``."""

    def render(self, content: Any) -> bytes:
        return to_api_json(content).encode("utf-8")


def rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """A frame as a list of row objects, in column order."""
    return frame.to_dicts()


def render(request: Request, template: str, **context: Any) -> str:
    """A page from a template. The report's base template links plotly.js and runs an inline
    script only when given ``plotly_src``: the server never does (its Content-Security-Policy
    forbids inline script) and links both scripts as files instead."""
    environment = request.app.state.served.templates
    defaults = {
        "crumbs": "/",
        "job_name": "",
        "generated": "",
        "plotly_src": None,
        "favicon": FAVICON_PATH,
    }
    return environment.get_template(template).render({**defaults, **context})


def page(request: Request, template: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(render(request, template, **context))


def templates() -> jinja2.Environment:
    """The report's environment (autoescaped, its filters, its templates: ``base.html``,
    ``job.html``, ...) with the server's own pages under ``server/``."""
    report = environment()
    assert report.loader is not None
    served = report.overlay(
        loader=jinja2.ChoiceLoader(
            [jinja2.PrefixLoader({"server": jinja2.FileSystemLoader(TEMPLATES)}), report.loader]
        )
    )
    served.globals = {**report.globals, "href": job_href}  # the report's own stay unchanged
    return served
