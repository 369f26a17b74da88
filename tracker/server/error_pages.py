"""Errors as a browser sees them: the one line in the pages' layout (the nav, the status, a
way back); the API and scripts keep the plain line (``security.one_line_error``)."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from urllib.parse import urlsplit, urlunsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, Response

from tracker.server.responses import render
from tracker.server.security import LOGIN_PATH, one_line_error


def error_response(
    request: Request, status: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """A browser asking for a page (its Accept names text/html, outside /api/) gets the
    error page; the API and scripts (``*/*``) get the one plain line."""
    accept = request.headers.get("accept", "")
    if request.url.path.startswith("/api/") or "text/html" not in accept:
        return one_line_error(request.url.path, status, message, headers)
    line = message.splitlines()[0] if message else "error"
    text = render(
        request,
        "server/error.html",
        status=status,
        reason=HTTPStatus(status).phrase,
        message=line,
        back=_same_origin_referrer(request),
    )
    return HTMLResponse(text, status_code=status, headers=headers)


def _same_origin_referrer(request: Request) -> str | None:
    """The referring page's path on this server, or None: another origin, the login (its
    URL holds the token) or this very page are no way back, and a path a browser would read
    as another host (``//evil``, ``/\\evil``) is none either."""
    referrer = urlsplit(request.headers.get("referer", ""))
    here = request.url
    if (referrer.scheme, referrer.netloc) != (here.scheme, here.netloc):
        return None
    if referrer.path.startswith("//") or "\\" in referrer.path:
        return None
    back = urlunsplit(("", "", referrer.path or "/", referrer.query, ""))
    if referrer.path == LOGIN_PATH or back == urlunsplit(("", "", here.path, here.query, "")):
        return None
    return back
