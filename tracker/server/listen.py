"""The server's listening socket, bound before uvicorn starts, so that a port in use is one
line and exit 1 (uvicorn's own bind reports a traceback-like log and exits 3); and uvicorn's
HTTP/1.1 protocol with the security headers on the one answer it gives by itself."""

from __future__ import annotations

import errno
import logging
import socket

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from tracker.errors import CannotListen, PortInUse
from tracker.masking import masked
from tracker.server.security import SECURITY_HEADERS

_GUARD_HEADERS = [(name.encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (0: any free port), for uvicorn to listen on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # as uvicorn does: a restarted server may take a port whose old connections linger
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # answers go out at once: accepted connections inherit it, and without it a keep-alive
    # client's second request waits ~40 ms (Nagle's algorithm against its delayed ACK)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(port=port) from None
        raise CannotListen(host=host, port=port, reason=exc.strerror or str(exc)) from None
    sock.set_inheritable(True)
    return sock


class Server(uvicorn.Server):
    """uvicorn's server on a socket bound beforehand, saying where it listens once started
    (uvicorn names the address only for sockets it bound itself)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and sockets:
            self._log_started_message(sockets)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, whose 400 for a request it cannot parse (answered before
    any application sees the request) carries the security headers as every other answer."""

    def send_400_response(self, msg: str) -> None:
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"connection", b"close"),
            *_GUARD_HEADERS,
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=msg.encode("ascii")),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()


def serve(app: FastAPI, host: str, port: int) -> None:
    """Serve ``app`` on ``host``:``port`` until interrupted; a port in use is ``PortInUse``."""
    sock = listening_socket(host, port)
    config = uvicorn.Config(app, host=host, port=port, log_level="info", http=GuardedH11Protocol)
    logging.getLogger("uvicorn.access").addFilter(mask_access_line)  # after uvicorn's setup
    Server(config).run(sockets=[sock])


def mask_access_line(record: logging.LogRecord) -> bool:
    """An access line without the secrets of its query (``/login?token=***``): uvicorn logs
    the path with its query as one of the record's arguments."""
    if isinstance(record.args, tuple):
        record.args = tuple(masked(a) if isinstance(a, str) else a for a in record.args)
    return True
