"""What every response of the server obeys: the token first, a strict Host, read-only
methods and the browser's guards.

The middleware runs before routing, so nothing else can answer first (no redirect, no 404,
no static file): with a token it refuses a request without it (401); it parses the Host
header strictly (400) and, without a token, serves only loopback names; it answers anything
but GET and HEAD with 405 (nothing can write, whatever a route would do); it runs HEAD as GET
without the body, and adds the security headers to every response passing through it:
scripts only from the server itself and never inline, no framing, no MIME sniffing.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Mapping

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracker.errors import UnsafeHost
from tracker.server.responses import TrackerJSON

ALLOWED_METHODS = ("GET", "HEAD")
TOKEN_COOKIE = "tracker_token"
LOGIN_PATH = "/login"  # where a browser trades the token for the cookie: open to all
TOKEN_REQUIRED = (
    "a token is required: send 'Authorization: Bearer TOKEN' or open /login?token=TOKEN"
)
# plotly draws with inline style attributes, so styles may be inline; scripts never are.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # an error page's way back; no other site learns a URL
    "Cross-Origin-Opener-Policy": "same-origin",
}
# RFC 9110's Host: a name (letters, digits, '-', '.'), an IPv4 address or a bracketed IPv6
# one, then at most a port of digits: nothing else, so "localhost:1@evil" and
# "[::1]evil.com" are no Host at all.
HOST = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>[0-9]{1,5}))?")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # any other name may resolve to a reachable address


def check_host(host: str, token: str | None) -> None:
    """Refuse to serve beyond this machine without a token."""
    if not token and not is_loopback(host):
        raise UnsafeHost(host=host)


def host_name(host_header: str) -> str | None:
    """The name of a well-formed Host header without its port (``[::1]:8765`` -> ``::1``);
    None for anything else."""
    found = HOST.fullmatch(host_header)
    if found is None:
        return None
    port = found.group("port")
    if port is not None and not 0 < int(port) <= 65535:
        return None
    name = found.group("name")
    if not name.startswith("["):
        return name
    try:
        return str(ipaddress.IPv6Address(name[1:-1]))
    except ValueError:
        return None


def token_matches(given: str | None, token: str) -> bool:
    """Exactly the token (no stripping), compared in constant time, so that the time taken
    tells nothing about it."""
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def given_token(connection: HTTPConnection) -> str | None:
    scheme, _, credentials = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials:
        return credentials
    return connection.cookies.get(TOKEN_COOKIE)


def one_line_error(
    path: str, status: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """The server's every error: one line, never a traceback; JSON under /api/, plain text
    for pages."""
    line = message.splitlines()[0] if message else "error"
    if path.startswith("/api/"):
        return TrackerJSON({"detail": line}, status_code=status, headers=headers)
    return PlainTextResponse(f"Error: {line}\n", status_code=status, headers=headers)


class SecurityMiddleware:
    """``token``: refuse every request without it, before anything else. Without a token,
    answer only requests addressed to a loopback name, so that a web page cannot reach the
    server through a name of its own that resolves to 127.0.0.1 (DNS rebinding)."""

    def __init__(self, app: ASGIApp, token: str | None = None) -> None:
        self.app = app
        self.token = token

    def _refusal(self, scope: Scope) -> Response | None:
        connection = HTTPConnection(scope)
        path = scope["path"]
        if (
            self.token is not None
            and path != LOGIN_PATH
            and not token_matches(given_token(connection), self.token)
        ):
            return one_line_error(path, 401, TOKEN_REQUIRED, {"WWW-Authenticate": "Bearer"})
        host = connection.headers.get("host", "")
        name = host_name(host)
        if host and name is None:
            return one_line_error(path, 400, f"malformed Host header {host!r}")
        if self.token is None and (name is None or not is_loopback(name)):
            return one_line_error(
                path,
                400,
                f"host {host!r} is not served without a token: use 127.0.0.1 or localhost, "
                "or start the server with a token",
            )
        if scope["method"] not in ALLOWED_METHODS:
            return one_line_error(
                path,
                405,
                f"method {scope['method']} is not allowed: this server only reads (GET, HEAD)",
                {"Allow": ", ".join(ALLOWED_METHODS)},
            )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = scope["method"] == "HEAD"

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            elif head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        refused = self._refusal(scope)
        if refused is not None:
            await refused(scope, receive, guarded)
            return
        if head:
            scope = {**scope, "method": "GET"}
        await self.app(scope, receive, guarded)
