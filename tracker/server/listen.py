"""The server's listening socket, bound before uvicorn starts, so that a port in use is one
line and exit 1 (uvicorn's own bind reports a traceback-like log and exits 3); and uvicorn's
HTTP/1.1 protocol with the security headers on the answers it gives by itself, and two bounds
uvicorn lacks, applied before any application (or token check) sees a request: a client
gets ``header_timeout_s`` to send a request's head (uvicorn times out only idle keep-alive
connections: a half-sent request stayed open for ever), and at most ``max_connections``
connections are held at once (one more is answered 503 and closed at once)."""

from __future__ import annotations

import asyncio
import errno
import gc
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


HEADER_TIMEOUT_S = 10.0  # a browser sends a request's head in one packet
MAX_CONNECTIONS = 500  # half of a common `ulimit -n` of 1,024: the rest for the database, logs


def _raw_answer(status: str, text: str, *headers: tuple[bytes, bytes]) -> bytes:
    """An answer written before h11 holds a request to answer (it cannot send one then)."""
    body = text.encode("ascii")
    fields = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *headers,
        *_GUARD_HEADERS,
    ]
    head = b"".join(name + b": " + value + b"\r\n" for name, value in fields)
    return f"HTTP/1.1 {status}\r\n".encode() + head + b"\r\n" + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, whose 400 for a request it cannot parse (answered before
    any application sees the request) carries the security headers as every other answer;
    with a time limit on a request's head and a cap on the connections held."""

    header_timeout_s = HEADER_TIMEOUT_S
    max_connections = MAX_CONNECTIONS
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:  # refused before it holds anything
            text = f"the server holds its most connections ({self.max_connections}); try again"
            transport.write(_raw_answer("503 Service Unavailable", text, (b"retry-after", b"5")))
            transport.close()
            return
        self._await_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # a request's head is in
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_head()  # the next request's head, within the same time

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            text = f"no whole request head within {self.header_timeout_s:g} s"
            self.transport.write(_raw_answer("408 Request Timeout", text))
            self.transport.close()

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


def serve(
    app: FastAPI,
    host: str,
    port: int,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
) -> None:
    """Serve ``app`` on ``host``:``port`` until interrupted; a port in use is ``PortInUse``."""
    sock = listening_socket(host, port)
    bounds = {"header_timeout_s": header_timeout_s, "max_connections": max_connections}
    protocol = type("GuardedH11Protocol", (GuardedH11Protocol,), bounds)
    config = uvicorn.Config(app, host=host, port=port, log_level="info", http=protocol)
    logging.getLogger("uvicorn.access").addFilter(mask_access_line)  # after uvicorn's setup
    settle_for_serving()
    Server(config).run(sockets=[sock])


def settle_for_serving() -> None:
    """The collector set for a process about to serve (``serve``; a benchmark's pages too).

    What the process holds by now (its imports, the app) lives as long as it: out of the
    collector's scans, which walked it at every full collection (a fifth of the CPU of the
    home page's first visit at 1,000 jobs); and a page's millions of tuples, freed by their
    counts, no longer set off a young collection every 700 (0.45 s at 3,000 jobs, not 0.09)."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 10)


def mask_access_line(record: logging.LogRecord) -> bool:
    """An access line without the secrets of its query (``/login?token=***``): uvicorn logs
    the path with its query as one of the record's arguments."""
    if isinstance(record.args, tuple):
        record.args = tuple(masked(a) if isinstance(a, str) else a for a in record.args)
    return True
