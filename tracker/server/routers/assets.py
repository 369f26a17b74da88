"""The pages' scripts and styles, served by the server itself: nothing comes from a CDN."""

from __future__ import annotations

from pathlib import Path

import plotly
from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse
from swagger_ui_bundle import swagger_ui_path

from tracker.views.templates import FAVICON
from tracker.views.templates import TEMPLATES as SHARED

router = APIRouter(include_in_schema=False)

STATIC = Path(__file__).resolve().parent.parent / "static"
# name -> (file, media type): the shared figure script, the server's own scripts and style
FILES = {
    "render.js": (SHARED / "render.js", "text/javascript"),
    "tables.js": (SHARED / "tables.js", "text/javascript"),
    "favicon.svg": (SHARED / FAVICON, "image/svg+xml"),  # the report inlines it
    "explorer.js": (STATIC / "explorer.js", "text/javascript"),
    "plot.js": (STATIC / "plot.js", "text/javascript"),
    "plotdraw.js": (STATIC / "plotdraw.js", "text/javascript"),
    "runs.js": (STATIC / "runs.js", "text/javascript"),
    "forms.js": (STATIC / "forms.js", "text/javascript"),
    "docs.js": (STATIC / "docs.js", "text/javascript"),
    "server.css": (STATIC / "server.css", "text/css"),
}
# name -> media type: what /docs uses of the swagger-ui-bundle package's dist folder
SWAGGER_UI_FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}


def _plotly_js() -> Path:
    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _swagger_ui_dist() -> Path:
    return Path(swagger_ui_path)


@router.get("/static/plotly.min.js")
def plotly_js() -> FileResponse:
    return FileResponse(_plotly_js(), media_type="text/javascript")


@router.get("/favicon.ico")
def favicon() -> FileResponse:
    """What browsers ask for where no page names its icon (a JSON answer, an old client)."""
    return static_file("favicon.svg")


@router.get("/static/swagger-ui/{name}")
def swagger_ui_file(name: str) -> FileResponse:
    if name not in SWAGGER_UI_FILES:
        raise HTTPException(status_code=404, detail=f"no Swagger UI file {name!r}")
    return FileResponse(_swagger_ui_dist() / name, media_type=SWAGGER_UI_FILES[name])


@router.get("/static/{name}")
def static_file(name: str) -> FileResponse:
    if name not in FILES:
        raise HTTPException(status_code=404, detail=f"no static file {name!r}")
    path, media_type = FILES[name]
    return FileResponse(path, media_type=media_type)
