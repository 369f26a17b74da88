"""``tracker serve`` at its edges: a SQLite file removed or replaced while serving, uvicorn's
own answers, and heavy requests bounded (single flight, a cache by window, a limit on
concurrent work). Every wait is for an event, never for a time."""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tracker.jobdir.sample import write_sample_job
from tracker.server import create_app
from tracker.server.security import SECURITY_HEADERS

SAFETY_S = 300  # only a net under a hang; no verdict depends on it
RUNNING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:(\d+))")
GONE = (
    "database file {path} is gone (removed or moved away); pages answer again once a tracker "
    "database is back at that path"
)


def ingest(url: str, directory: Path) -> None:
    """In a process of its own, as a user's ingest beside the running server."""
    command = [sys.executable, "-m", "tracker", "--db", url, "ingest", str(directory)]
    subprocess.run(command, check=True, capture_output=True, timeout=SAFETY_S)


def job_names(client: TestClient) -> list[str]:
    response = client.get("/api/jobs")
    assert response.status_code == 200, response.text
    return [row["job"] for row in response.json()]


@pytest.fixture
def served_file(tmp_path: Path) -> Iterator[tuple[TestClient, Path]]:
    path = tmp_path / "tracker.db"
    ingest(f"sqlite:///{path}", write_sample_job(tmp_path / "old", steps=30))
    with TestClient(create_app(f"sqlite:///{path}"), base_url="http://127.0.0.1:8765") as client:
        yield client, path


def test_a_removed_then_reingested_database_is_served_anew(
    served_file: tuple[TestClient, Path], tmp_path: Path
) -> None:
    client, path = served_file
    assert job_names(client) == ["old"]
    path.unlink()
    gone = client.get("/api/jobs")
    assert gone.status_code == 503
    assert gone.json() == {"detail": GONE.format(path=path)}
    page = client.get("/")
    assert page.status_code == 503
    assert page.text == f"Error: {GONE.format(path=path)}\n"
    assert client.get("/jobs/old/").status_code == 503
    ingest(f"sqlite:///{path}", write_sample_job(tmp_path / "new", steps=30))
    assert job_names(client) == ["new"]
    assert client.get("/jobs/new/").status_code == 200
    assert client.get("/jobs/old/").status_code == 404


def test_a_database_moved_over_the_served_one_is_served(
    served_file: tuple[TestClient, Path], tmp_path: Path
) -> None:
    client, path = served_file
    assert job_names(client) == ["old"]
    other = tmp_path / "other.db"
    ingest(f"sqlite:///{other}", write_sample_job(tmp_path / "moved", steps=30))
    os.replace(other, path)
    assert job_names(client) == ["moved"]
    curve = client.get("/api/curve", params={"job": "moved", "arm": "ref_s0"})
    assert curve.status_code == 200 and curve.json()["total"] == 30


@contextmanager
def running_server(url: str) -> Iterator[int]:
    """A real ``tracker serve`` on a free port; yields the port once uvicorn says so."""
    command = [sys.executable, "-m", "tracker", "--db", url, "serve", "--port", "0"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put("")  # the process ended

    threading.Thread(target=read, daemon=True).start()
    try:
        while True:
            line = lines.get(timeout=SAFETY_S)
            assert line, "the server ended before listening"
            found = RUNNING.search(line)
            if found:
                yield int(found.group(2))
                return
    finally:
        process.terminate()
        process.wait(timeout=SAFETY_S)


def test_uvicorns_own_400_carries_the_security_headers(tmp_path: Path) -> None:
    """A request uvicorn cannot parse is answered before any application sees it."""
    path = tmp_path / "tracker.db"
    ingest(f"sqlite:///{path}", write_sample_job(tmp_path / "job1", steps=10))
    with running_server(f"sqlite:///{path}") as port:
        sock = socket.create_connection(("127.0.0.1", port), timeout=SAFETY_S)
        with sock:
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    head, _, body = answer.decode("latin-1").partition("\r\n\r\n")
    status, *fields = head.split("\r\n")
    assert status == "HTTP/1.1 400 Bad Request"
    headers = {name.lower(): value for name, _, value in (f.partition(": ") for f in fields)}
    for name, value in SECURITY_HEADERS.items():
        assert headers[name.lower()] == value
    assert body == "Invalid HTTP request received."
