"""What every response of the server obeys: read-only methods and the browser's guards.

The middleware answers anything but GET and HEAD with 405 before routing (nothing can write,
whatever a route would do), runs HEAD as GET without the body, and adds the security headers:
scripts only from the server itself and never inline, no framing, no MIME sniffing.
"""

from __future__ import annotations

import ipaddress

from starlette.datastructures import MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracker.errors import UnsafeHost

ALLOWED_METHODS = ("GET", "HEAD")
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
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


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


def _host_name(host_header: str) -> str:
    """The name of a Host header without its port: ``[::1]:8765`` -> ``::1``."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class SecurityMiddleware:
    """``loopback_only``: without a token, answer only requests addressed to a loopback
    name, so that a web page cannot reach the server through a name of its own that resolves
    to 127.0.0.1 (DNS rebinding)."""

    def __init__(self, app: ASGIApp, loopback_only: bool = True) -> None:
        self.app = app
        self.loopback_only = loopback_only

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

        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if self.loopback_only and not is_loopback(_host_name(host)):
            refusal = PlainTextResponse(
                f"Error: host {host!r} is not served without a token: use 127.0.0.1 or "
                "localhost, or start the server with a token\n",
                status_code=400,
            )
            await refusal(scope, receive, guarded)
            return
        if scope["method"] not in ALLOWED_METHODS:
            refusal = PlainTextResponse(
                f"Error: method {scope['method']} is not allowed: this server only reads "
                "(GET, HEAD)\n",
                status_code=405,
                headers={"Allow": ", ".join(ALLOWED_METHODS)},
            )
            await refusal(scope, receive, guarded)
            return
        if head:
            scope = {**scope, "method": "GET"}
        await self.app(scope, receive, guarded)
