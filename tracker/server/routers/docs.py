"""``/docs``: Swagger UI on /openapi.json, from the server's own files (routers/assets.py).

FastAPI's own page (``get_swagger_ui_html``) runs its set-up as inline script, which the
Content-Security-Policy forbids: this page's template links static/docs.js instead.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from tracker.server.responses import page

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
def docs(request: Request) -> HTMLResponse:
    return page(request, "server/docs.html")
