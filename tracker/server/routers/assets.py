"""The pages' scripts and styles, served by the server itself: nothing comes from a CDN."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, Response

router = APIRouter(include_in_schema=False)

STATIC = Path(__file__).resolve().parent.parent / "static"
SCRIPTS = ("figures.js", "explorer.js", "filter.js")


def _plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@router.get("/static/plotly.min.js")
def plotly_js() -> FileResponse:
    return FileResponse(_plotly_js(), media_type="text/javascript")


@router.get("/static/tracker.css")
def stylesheet() -> Response:
    from tracker.report.html import CSS

    return Response(CSS + (STATIC / "server.css").read_text(), media_type="text/css")


@router.get("/static/{name}")
def script(name: str) -> FileResponse:
    if name not in SCRIPTS:
        raise HTTPException(status_code=404, detail=f"no static file {name!r}")
    return FileResponse(STATIC / name, media_type="text/javascript")
