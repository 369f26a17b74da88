"""JSON as ``--format json`` writes it (NaN null, +-inf "Infinity"), and HTML from templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi.responses import HTMLResponse, JSONResponse

from tracker.output import json_safe

if TYPE_CHECKING:
    import jinja2
    import polars as pl
    from fastapi import Request

TEMPLATES = Path(__file__).parent / "templates"


def _safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_safe(v) for v in value]
    return json_safe(value)


class TrackerJSON(JSONResponse):
    """Strict JSON: a non-finite number can never slip through as ``NaN``."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(_safe(content), allow_nan=False, default=str, separators=(",", ":"))
        return text.encode("utf-8")


def rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """A frame as a list of row objects, in column order."""
    return frame.to_dicts()


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A template of the served pages, rendered with autoescaping."""
    environment = request.app.state.served.templates
    html = environment.get_template(template).render(request=request, **context)
    return HTMLResponse(html, status_code=status_code)


def _fmt(value: Any, signed: bool = False) -> str:
    from tracker.report.html import fmt_value

    if signed and isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:+.4g}"
    return fmt_value(value)


def templates() -> jinja2.Environment:
    """The pages' templates, autoescaped: text from the database is always inert."""
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True
    )
    environment.filters["fmt"] = _fmt
    return environment
