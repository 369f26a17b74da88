"""``tracker serve`` at its edges: a SQLite file removed or replaced while serving, uvicorn's
own answers, and heavy requests bounded (single flight, a cache by window, a limit on
concurrent work). Every wait is for an event, never for a time."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

import tracker.server.routers.curve as curve_router
from tests.live_server import running_server
from tests.server.held import SAFETY_S, HeldCalls
from tracker.sample import write_sample_job
from tracker.server import create_app
from tracker.server.security import SECURITY_HEADERS

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


def test_an_app_served_and_closed_is_freed_with_its_database(tmp_path: Path) -> None:
    """A process that makes apps (tests, an embedding server) keeps none it has let go: FastAPI
    caches what it learns of each endpoint by the function, so no endpoint may close over one."""
    url = f"sqlite:///{tmp_path / 'tracker.db'}"
    ingest(url, write_sample_job(tmp_path / "job", steps=30))
    app = create_app(url)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert client.get("/openapi.json").status_code == 200
        assert job_names(client) == ["job"]
    freed = weakref.ref(app)
    del app, client
    gc.collect()
    assert freed() is None


def test_uvicorns_own_400_carries_the_security_headers(tmp_path: Path) -> None:
    """A request uvicorn cannot parse is answered before any application sees it."""
    path = tmp_path / "tracker.db"
    ingest(f"sqlite:///{path}", write_sample_job(tmp_path / "job1", steps=10))
    with running_server(f"sqlite:///{path}") as base:
        port = urlsplit(base).port
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


@pytest.fixture
def long_curve(tmp_path: Path) -> Iterator[TestClient]:
    path = tmp_path / "tracker.db"
    ingest(f"sqlite:///{path}", write_sample_job(tmp_path / "job1", steps=3000))
    with TestClient(create_app(f"sqlite:///{path}"), base_url="http://127.0.0.1:8765") as client:
        yield client


def window(start: int, end: int) -> str:
    return f"/api/curve?job=job1&arm=ref_s0&start={start}&end={end}"


def in_threads(client: TestClient, paths: list[str]) -> tuple[list[threading.Thread], list[Any]]:
    answers: list[Any] = [None] * len(paths)

    def get(i: int) -> None:
        answers[i] = client.get(paths[i])

    threads = [threading.Thread(target=get, args=(i,)) for i in range(len(paths))]
    for thread in threads:
        thread.start()
    return threads, answers


def test_concurrent_requests_for_one_window_share_one_computation(
    long_curve: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = HeldCalls(monkeypatch, curve_router, "read_window")
    curves = long_curve.app.state.served.curves  # type: ignore[attr-defined]
    threads, answers = in_threads(long_curve, [window(0, 2999)] * 16)
    loads.wait_for_calls(1)
    with curves.changed:  # the other 15 wait for the first one's result
        assert curves.changed.wait_for(lambda: curves.waiting() == 15, SAFETY_S)
    loads.release.set()
    for thread in threads:
        thread.join(SAFETY_S)
    assert [answer.status_code for answer in answers] == [200] * 16
    assert all(answer.json() == answers[0].json() for answer in answers)
    assert answers[0].json()["in_window"] == 3000 and len(answers[0].json()["step"]) <= 2000
    assert loads.calls == 1
    assert long_curve.get(window(0, 2999)).json() == answers[0].json()  # kept by its range
    assert long_curve.get(window(10, 20)).json()["step"] == list(range(10, 21))
    assert loads.calls == 2
    long_curve.get(window(0, 2999))
    long_curve.get(window(10, 20))
    assert loads.calls == 2


def test_with_every_heavy_slot_taken_a_request_is_answered_503_with_retry_after(
    long_curve: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    plot = "/api/plot?run=job1/ref_s0&points=100"
    assert long_curve.get(plot).status_code == 200
    loads = HeldCalls(monkeypatch, curve_router, "read_window")
    heavy = long_curve.app.state.served.heavy  # type: ignore[attr-defined]
    heavy.patience_s = 0  # refuse at once rather than queue: the test holds the slots
    held = [window(0, 999 + i) for i in range(heavy.slots)]
    threads, answers = in_threads(long_curve, held)
    loads.wait_for_calls(heavy.slots)
    busy = long_curve.get(window(5, 50))
    assert busy.status_code == 503
    assert busy.headers["retry-after"] == "5"
    assert busy.json() == {
        "detail": f"the server is busy: {heavy.slots} heavy requests are under way and more "
        "are queued; try again in 5 s"
    }
    page = long_curve.get("/jobs/job1/")  # a job's first view is heavy work too
    assert page.status_code == 503 and page.headers["retry-after"] == "5"
    assert long_curve.get("/api/jobs").status_code == 200  # light work goes on
    # a plot is heavy work: one slot for its whole computation, queued like the others
    assert long_curve.get(plot).status_code == 503
    loads.release.set()
    for thread in threads:
        thread.join(SAFETY_S)
    assert [answer.status_code for answer in answers] == [200] * heavy.slots
    assert long_curve.get(window(5, 50)).json()["step"] == list(range(5, 51))
    assert long_curve.get("/jobs/job1/").status_code == 200


def test_a_curve_answer_is_bounded_like_a_plots(long_curve: TestClient) -> None:
    too_many = long_curve.get("/api/curve?job=job1&arm=ref_s0&points=2001")
    assert too_many.status_code == 422
    assert too_many.json()["detail"].startswith("bad parameter 'points': Input should be less")
    whole = long_curve.get("/api/curve?job=job1&arm=ref_s0&points=2000").json()
    assert whole["in_window"] == 3000 and len(whole["step"]) <= 2000 and not whole["raw"]
