"""Errors as a browser sees them: a page in the site's layout (the nav, the status, the one
line, a way home and back to a same-origin referrer); the API keeps JSON and scripts the plain
line. The favicon is served, with the security headers."""

from __future__ import annotations

import html
import re
from http import HTTPStatus

import pytest
from fastapi.testclient import TestClient

from tracker.server.security import SECURITY_HEADERS
from tracker.views.templates import TEMPLATES

STEPS = 60
JOBS = {"j1": ({"seed": 0}, ["time=2026-10-01T00:00:00Z"])}
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
ORIGIN = "http://127.0.0.1:8765"
NAV = '<nav class="crumbs live"><a href="/">jobs</a> &middot; <a href="/runs">runs</a>'
PAGES = [
    ("/jobs/nope", 404, HTTPStatus(404).phrase, "no job named 'nope'"),
    ("/nowhere", 404, HTTPStatus(404).phrase, "Not Found"),
    ("/trend?metric=nope", 422, HTTPStatus(422).phrase, "unknown metric 'nope'; choose one"),
    ("/?sort=nope", 422, HTTPStatus(422).phrase, "bad parameter 'sort': Input should be"),
]


def back_links(page: str) -> list[str]:
    return re.findall(r'<a href="([^"]*)" rel="prev">back to the page you came from</a>', page)


@pytest.mark.parametrize(("path", "status", "reason", "line"), PAGES, ids=[p[0] for p in PAGES])
def test_an_error_page_keeps_the_nav_and_a_way_back(
    client: TestClient, path: str, status: int, reason: str, line: str
) -> None:
    response = client.get(path, headers={**BROWSER, "Referer": f"{ORIGIN}/claims?group_by=gpu"})
    assert response.status_code == status
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert all(response.headers[k] == v for k, v in SECURITY_HEADERS.items())
    page = response.text
    assert NAV in page
    assert f"<h1>{status} {reason}</h1>" in page
    assert f"<title>{status} {reason}: tracker</title>" in page
    (error,) = re.findall(r'<p class="error-line">(.*)</p>', page)
    assert html.unescape(error).startswith(f"Error: {line}")
    assert back_links(page) == ["/claims?group_by=gpu"]
    assert '<a href="/">all jobs</a>' in page
    assert '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">' in page


@pytest.mark.parametrize(
    "referrer",
    [
        "",
        "https://evil.example/claims",
        "http://127.0.0.1:9999/claims",  # another port: another origin
        f"{ORIGIN}//evil.example/x",  # a path a browser reads as a host
        f"{ORIGIN}/login?token=s3cret",
        f"{ORIGIN}/jobs/nope/",  # the failing page itself (/jobs/nope redirects to it)
    ],
)
def test_only_a_same_origin_referrer_is_a_way_back(client: TestClient, referrer: str) -> None:
    headers = {**BROWSER, "Referer": referrer} if referrer else BROWSER
    page = client.get("/jobs/nope", headers=headers).text
    assert back_links(page) == []
    assert '<a href="/">all jobs</a>' in page


def test_scripts_and_the_api_keep_their_one_line(client: TestClient) -> None:
    plain = client.get("/jobs/nope")
    assert plain.headers["content-type"].startswith("text/plain")
    assert plain.text.startswith("Error: no job named 'nope'") and plain.text.count("\n") == 1
    for path, status in [("/api/jobs/nope", 404), ("/api/trend?metric=nope", 422)]:
        api = client.get(path, headers=BROWSER)
        assert api.status_code == status
        assert api.headers["content-type"] == "application/json"
        assert set(api.json()) == {"detail"}


@pytest.mark.parametrize("path", ["/favicon.ico", "/static/favicon.svg"])
def test_the_favicon_is_served_with_the_security_headers(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/svg+xml"
    assert response.content == (TEMPLATES / "favicon.svg").read_bytes()
    assert all(response.headers[k] == v for k, v in SECURITY_HEADERS.items())


def test_every_page_links_the_favicon(client: TestClient) -> None:
    for path in ("/", "/trend", "/claims", "/jobs/j1/"):
        assert '<link rel="icon" type="image/svg+xml" href="/static/favicon.svg">' in (
            client.get(path).text
        )
