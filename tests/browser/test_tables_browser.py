"""Every table sorts and filters in Chromium (tables.js): the report's index and job page,
and the live server's home, job, comparison, trend and claims pages, whose scripts come
from files only (the Content-Security-Policy refuses inline script, and would say so on the
console). Waits are for events (a load, a navigation), never a pause."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import (
    SharedServers,
    Watch,
    ingest_served_jobs,
    open_page,
    open_report_page,
)
from tests.browser.test_report_browser import CROSS_JOB_TRACES
from tests.conftest import Cli
from tracker.sample import write_sample_job

# The tables that sort and filter in the browser (tables.js): a leading number of a cell, as
# the value filter writes it; missing values are the empty cell and the dash.
LEADING_NUMBER = re.compile(
    r"^[+-]?(?:inf(?:inity)?|nan|\d[\d,]*(?:\.\d*)?(?:e[+-]?\d+)?|\.\d+)", re.I
)
MISSING = ("", "\u2014", "\u2013", "-")
TABLE_CELLS = """id => Array.from(document.getElementById(id).tBodies[0].rows)
  .map(r => Array.from(r.cells).map(c => c.textContent.trim()))"""
TABLE_HEADERS = """id => Array.from(document.getElementById(id).tHead.rows[0].cells)
  .map(th => [th.classList.contains('num'), th.getAttribute('aria-sort')])"""
SHOWN_ROWS = (
    "id => Array.from(document.getElementById(id).tBodies[0].rows).filter(r => !r.hidden).length"
)
ROW_TEXTS = """id => Array.from(document.getElementById(id).tBodies[0].rows)
  .map(r => r.textContent.toLowerCase())"""


def number_of(text: str) -> float | None:
    """A cell's number as tables.js reads it; None when the cell is missing or not one."""
    found = LEADING_NUMBER.match(text)
    if text in MISSING or not found:
        return None
    return float(found.group(0).replace(",", "").lower().replace("infinity", "inf"))


def numeric_column(cells: list[list[str]], headers: list[list[Any]]) -> int:
    """The column with the most distinct numbers among the numeric ones (a header of class
    num, or every value a number): at least two, so that an order can be checked."""

    def numeric(i: int) -> bool:
        texts = [row[i] for row in cells if row[i] not in MISSING]
        fully = all((m := LEADING_NUMBER.match(t)) and m.group(0) == t for t in texts)
        return bool(headers[i][0] or fully)

    distinct = {
        i: len({n for row in cells if (n := number_of(row[i])) is not None})
        for i in range(len(headers))
        if numeric(i)
    }
    best = max(distinct, key=lambda i: distinct[i])
    assert distinct[best] >= 2, (headers, cells)
    return best


def in_order(values: list[float | None], descending: bool) -> bool:
    """Numbers in order (NaN above +inf), missing values last either way."""

    def rank(value: float | None) -> tuple[int, float]:
        if value is None:
            return (2, 0.0)
        if value != value:  # NaN
            return (1, 0.0) if not descending else (-1, 0.0)
        return (0, -value if descending else value)

    ranks = [rank(v) for v in values]
    return ranks == sorted(ranks)


def assert_table_sorts_and_filters(page: Any, table: str, server_sorted: bool = False) -> None:
    """The table sorts by its numeric column both ways (a click on the header, a second one)
    unless the server sorts it, and filters by every word typed, case-blind (the server's jobs
    table: by its form, sent)."""
    headers = page.evaluate(TABLE_HEADERS, table)
    cells = page.evaluate(TABLE_CELLS, table)
    total = len(cells)
    assert total >= 2, table
    if not server_sorted:
        column = numeric_column(cells, headers)
        button = page.locator(f"#{table} thead th").nth(column).locator("button.sort")
        for descending in (False, True):
            button.click()
            values = [number_of(row[column]) for row in page.evaluate(TABLE_CELLS, table)]
            assert in_order(values, descending), (table, column, descending, values)
            assert page.evaluate(TABLE_HEADERS, table)[column][1] == (
                "descending" if descending else "ascending"
            )
    # two words of the last row, from two of its cells, typed in capitals
    last = page.evaluate(TABLE_CELLS, table)[-1]
    words = [text.split()[0].lower() for text in last if text not in MISSING][:2]
    texts = page.evaluate(ROW_TEXTS, table)
    expected = sum(all(word in text for word in words) for text in texts)
    assert expected >= 1
    prefix = page.evaluate("id => document.getElementById(id).dataset.controls || id", table)
    if prefix == "served":  # the server's jobs table: its filter is a form it answers
        prefix = "jobs"
        for typed in (" ".join(words).upper(), ""):
            page.fill("#jobs-filter", typed)
            with page.expect_navigation(wait_until="load"):
                page.press("#jobs-filter", "Enter")
            if typed:
                assert page.evaluate(SHOWN_ROWS, table) == expected, (table, words)
                assert page.locator(
                    "#jobs-info"
                ).text_content() == f"jobs 1\u2013{expected} of {expected}" + (
                    f" (filtered from {total})" if expected < total else ""
                )
        assert page.evaluate(SHOWN_ROWS, table) == total
        return
    page.fill(f"#{prefix}-filter", " ".join(words).upper())
    assert page.evaluate(SHOWN_ROWS, table) == expected, (table, words)
    info = page.locator(f"#{prefix}-info").text_content()
    if prefix == "jobs":  # the paged jobs table (one page here) tells its jobs
        assert info == f"jobs 1\u2013{expected} of {expected}" + (
            f" (filtered from {total})" if expected < total else ""
        )
    else:
        assert info == f"{expected} of {total} rows", (table, info)
    page.fill(f"#{prefix}-filter", "")
    assert page.evaluate(SHOWN_ROWS, table) == total


def assert_every_table_sorts_and_filters(page: Any, server_sorted: tuple[str, ...] = ()) -> int:
    """Every table of the page's main part sorts and filters; the number of tables."""
    tables: list[str] = page.evaluate(
        "Array.from(document.querySelectorAll('main table')).map(t => t.id)"
    )
    assert all(tables), tables  # tables.js named every table
    for table in tables:
        assert_table_sorts_and_filters(page, table, table in server_sorted)
    return len(tables)


def test_report_tables_sort_and_filter(browser: Any, demo_report: Path) -> None:
    watch = Watch()
    page = open_report_page(browser, demo_report / "index.html", watch, len(CROSS_JOB_TRACES))
    # the jobs, the claims, the known setup differences, the bytes/param per variant, the
    # comparison
    assert assert_every_table_sorts_and_filters(page) == 5
    page = open_report_page(browser, demo_report / "job3" / "index.html", watch, 3)
    assert assert_every_table_sorts_and_filters(page) == 1  # the verdicts
    assert watch.problems() == {}


ORDERING_TABLE = """<main><table><thead><tr><th>name</th><th class="num">value</th><th>count</th>
</tr></thead><tbody>{}</tbody></table></main>"""
ORDERING_ROWS = [  # name, value (a numeric header), count (numbers only: numeric too)
    ("job10", "1,234", "10"),
    ("&lt;img src=x onerror=alert(1)&gt;", "NaN", "9"),
    ("job2", "-inf", "\u2014"),
    ("Job1", "\u2014", "100"),
    ("b", "5 of 7", "2"),
    ("a", "inf", ""),
    ("c", "-0.5", "3"),
    ("d", "3e-4", "1"),
    ("e", "", "0"),
]


def test_tables_order_numbers_nan_inf_and_missing(browser: Any) -> None:
    """tables.js alone on a page: its ordering rules, the filter, and cells kept inert."""
    from tracker.views.templates import TEMPLATES

    watch = Watch()
    page = browser.new_page()
    page.on("pageerror", lambda exc: watch.errors.append(str(exc)))
    page.on("dialog", lambda d: watch.dialogs.append(d.message))
    rows = "".join(f"<tr><td>{a}</td><td>{b}</td><td>{c}</td></tr>" for a, b, c in ORDERING_ROWS)
    page.set_content(ORDERING_TABLE.format(rows))
    page.add_script_tag(path=str(TEMPLATES / "tables.js"))

    def column(i: int) -> list[str]:
        return [row[i] for row in page.evaluate(TABLE_CELLS, "table-1")]

    header = page.locator("#table-1 thead th button.sort")
    header.nth(1).click()
    assert column(1) == ["-inf", "-0.5", "3e-4", "5 of 7", "1,234", "inf", "NaN", "\u2014", ""]
    header.nth(1).click()
    assert column(1) == ["NaN", "inf", "1,234", "5 of 7", "3e-4", "-0.5", "-inf", "\u2014", ""]
    header.nth(2).click()  # every value a number: numeric without the class; ties (the
    # missing ones) keep the order they had: inf's row before -inf's
    assert column(2) == ["0", "1", "2", "3", "9", "10", "100", "", "\u2014"]
    header.nth(0).click()  # names: case-blind, the numbers in them as numbers
    assert column(0)[:6] == ["<img src=x onerror=alert(1)>", "a", "b", "c", "d", "e"]
    assert column(0)[6:] == ["Job1", "job2", "job10"]
    assert page.locator("#table-1 th[aria-sort]").count() == 1
    page.fill("#table-1-filter", "ONERROR <img")
    assert page.evaluate(SHOWN_ROWS, "table-1") == 1
    assert page.locator("#table-1-info").text_content() == f"1 of {len(ORDERING_ROWS)} rows"
    assert page.locator("img").count() == 0
    assert watch.problems() == {}


INLINE_SCRIPTS = (
    "Array.from(document.scripts).filter(s => !s.src && s.type !== 'application/json').length"
)
# path -> the page's tables: their count, and those whose headers are the server's sort links
PAGES = {
    "/": (5, ("jobs-table",)),  # claims, known differences, jobs, bytes/param, comparison
    "/jobs/uneven/": (2, ()),  # verdicts, curves
    "/compare?a=job2&b=job3": (1, ()),
    "/trend?metric=bpp_state": (1, ()),
    "/claims": (2, ()),  # the claims, the known setup differences
}


def ingest_uneven(cli: Cli, root: Path) -> None:
    """A job whose candidate stopped early (its curves table has numbers to order)."""
    uneven = write_sample_job(root / "uneven", seed=3, steps=300, arms=("ref_s0",))
    write_sample_job(uneven, seed=3, steps=120, arms=("flash_s0",))
    cli("ingest", str(uneven), "--meta", "time=2026-11-21T09:00:00Z")


@pytest.fixture
def served(db_url: str, shared_servers: SharedServers) -> str:
    """The demo jobs' server, and a job whose candidate stopped early, ingested while the
    server runs."""
    return shared_servers.serve(db_url, "served", ingest_served_jobs, then=ingest_uneven)


@pytest.mark.parametrize("path", PAGES)
def test_every_table_sorts_and_filters(browser: Any, served: str, path: str) -> None:
    watch = Watch()
    page = open_page(browser, served, watch)
    page.goto(f"{served}{path}", wait_until="load")
    tables, server_sorted = PAGES[path]
    assert assert_every_table_sorts_and_filters(page, server_sorted) == tables
    assert page.evaluate(INLINE_SCRIPTS) == 0
    assert watch.problems() == {}  # a refused script or style would be a console error


def test_home_jobs_sort_by_a_numeric_column_on_the_server(browser: Any, server: str) -> None:
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
