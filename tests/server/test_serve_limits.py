"""``tracker serve``'s own bounds on slow and numerous clients, before any application (or
token check) sees a request: a request's head must arrive within ``--header-timeout``, and
at most ``--max-connections`` connections are held (one more: 503, closed at once). Events
only: a test waits for the server to close a connection, never for a time."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.live_server import running_server
from tests.server.held import SAFETY_S
from tests.server.test_serve_edges import ingest
from tracker.sample import write_sample_job
from tracker.server.security import SECURITY_HEADERS

TOKEN = "s3cret-token-for-tests"


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    ingest(url, write_sample_job(tmp_path / "job1", steps=10))
    return url


def connect(base: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", urlsplit(base).port or 0), timeout=SAFETY_S)


def until_closed(sock: socket.socket) -> str:
    """Everything the server sends until it closes the connection."""
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer.decode("latin-1")


def status_and_headers(answer: str) -> tuple[str, dict[str, str], str]:
    head, _, body = answer.partition("\r\n\r\n")
    status, *fields = head.split("\r\n")
    headers = {name.lower(): value for name, _, value in (f.partition(": ") for f in fields)}
    return status, headers, body


def get(base: str, path: str = "/api/jobs") -> str:
    with connect(base) as sock:
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        return until_closed(sock)


def test_a_half_sent_request_is_closed_after_the_header_timeout(database: str) -> None:
    with running_server(database, "--header-timeout", "0.2", "--token", TOKEN) as base:
        with connect(base) as slow:
            slow.sendall(b"GET /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            status, headers, body = status_and_headers(until_closed(slow))
        assert status == "HTTP/1.1 408 Request Timeout"
        assert body == "no whole request head within 0.2 s"
        for name, value in SECURITY_HEADERS.items():
            assert headers[name.lower()] == value
        with connect(base) as idle:  # nothing sent at all: closed too
            assert until_closed(idle).startswith("HTTP/1.1 408 Request Timeout")
        # a whole request is answered as ever (401: the token is checked after the head)
        assert get(base).startswith("HTTP/1.1 401 Unauthorized")


@pytest.fixture
def held() -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    yield sockets
    for sock in sockets:
        sock.close()


def test_one_connection_past_the_limit_is_answered_503_and_closed(
    database: str, held: list[socket.socket]
) -> None:
    with running_server(database, "--max-connections", "3", "--header-timeout", "300") as base:
        for _ in range(3):
            held.append(connect(base))
            held[-1].sendall(b"GET /api/jobs HTTP/1.1\r\n")  # heads begun, never finished
        with connect(base) as extra:  # answered as it is accepted, before any request
            status, headers, body = status_and_headers(until_closed(extra))
        assert status == "HTTP/1.1 503 Service Unavailable"
        assert headers["retry-after"] == "5"
        assert body == "the server holds its most connections (3); try again"
        held.pop().close()
        # the server takes the close in as an event of its own: asked again until it has
        for _ in range(10_000):
            try:
                answer = get(base)
            except ConnectionResetError:  # refused while the request was still unread
                continue
            if not answer.startswith("HTTP/1.1 503"):
                break
        assert answer.startswith("HTTP/1.1 200 OK")
