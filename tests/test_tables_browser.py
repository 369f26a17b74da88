"""Every table of the live server's pages sorts and filters in Chromium (tables.js): the
home page's, a job's, the comparison's, the trend's values and the claims. The scripts come
from files only (the Content-Security-Policy refuses inline script, and would say so on the
console). Waits are for events (a load, a navigation), never a pause."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.test_report_browser import (  # noqa: F401 (the fixture)
    TABLE_CELLS,
    TABLE_HEADERS,
    Watch,
    assert_every_table_sorts_and_filters,
    browser,
    in_order,
    number_of,
    numeric_column,
)
from tests.test_serve_browser import open_page, server  # noqa: F401 (the fixture)
from tracker.jobdir.sample import write_sample_job

INLINE_SCRIPTS = (
    "Array.from(document.scripts).filter(s => !s.src && s.type !== 'application/json').length"
)
# path -> the page's tables: their count, and those whose headers are the server's sort links
PAGES = {
    "/": (4, ("jobs-table",)),  # claims, jobs, bytes/param, the latest comparison
    "/jobs/uneven/": (2, ()),  # verdicts, curves
    "/compare?a=job2&b=job3": (1, ()),
    "/trend?metric=bpp_state": (1, ()),
    "/claims": (1, ()),
}


@pytest.fixture
def served(server: str, cli: Cli, tmp_path: Path) -> Iterator[str]:  # noqa: F811
    """The demo jobs' server, and a job whose candidate stopped early (its curves table has
    numbers to order), ingested while the server runs."""
    uneven = write_sample_job(tmp_path / "uneven", seed=3, steps=300, arms=("ref_s0",))
    write_sample_job(uneven, seed=3, steps=120, arms=("flash_s0",))
    cli("ingest", str(uneven), "--meta", "time=2026-11-21T09:00:00Z")
    yield server


@pytest.mark.parametrize("path", PAGES)
def test_every_table_sorts_and_filters(browser: Any, served: str, path: str) -> None:  # noqa: F811
    watch = Watch()
    page = open_page(browser, served, watch)
    page.goto(f"{served}{path}", wait_until="load")
    tables, server_sorted = PAGES[path]
    assert assert_every_table_sorts_and_filters(page, server_sorted) == tables
    assert page.evaluate(INLINE_SCRIPTS) == 0
    assert watch.problems() == {}  # a refused script or style would be a console error


def test_home_jobs_sort_by_a_numeric_column_on_the_server(browser: Any, server: str) -> None:  # noqa: F811
    watch = Watch()
    page = open_page(browser, server, watch)
    page.goto(f"{server}/", wait_until="load")
    headers = page.evaluate(TABLE_HEADERS, "jobs-table")
    column = numeric_column(page.evaluate(TABLE_CELLS, "jobs-table"), headers)
    link = page.locator("#jobs-table thead th").nth(column).locator("a.sort")
    for descending in (True, False):  # counts sort the most first
        link.click()
        page.wait_for_url(f"**order={'desc' if descending else 'asc'}")
        values = [number_of(row[column]) for row in page.evaluate(TABLE_CELLS, "jobs-table")]
        assert in_order(values, descending), values
    assert watch.problems() == {}
