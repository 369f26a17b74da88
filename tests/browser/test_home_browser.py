"""The home, claims and trend pages and the report's index as Chromium lays them out at
1280 x 800: a badge on one line, no legend over a title, no footnote past a figure's right
edge, the claims' detail on the page and in no scroll box of its own, sorting and the
status filter in the URL. Waits are for events (a load, a drawn plot), never a pause."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Watch, ingest_served_jobs, open_page, small_jobs_report
from tests.conftest import Cli
from tests.live_server import running_server
from tests.templates import Templates

SPEEDRUN = Path(__file__).parent.parent / "data" / "speedrun" / "2026-01-24_ImprovedLMHead"

JOBS = 14  # a legend entry per job in each arm's figure: several rows of them
VIEWPORT = {"width": 1280, "height": 800}

# Every drawn figure: does its legend overlap its title or its plot area, and does any
# annotation (footnote) run past the figure's right edge?
FIGURE_LAYOUT = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(p => {
  const box = el => el ? el.getBoundingClientRect() : null;
  const meet = (a, b) => a && b && a.left < b.right && b.left < a.right
    && a.top < b.bottom && b.top < a.bottom;
  const title = box(p.querySelector('.gtitle')), legend = box(p.querySelector('.legend'));
  const plot = box(p.querySelector('.nsewdrag')), edge = box(p.querySelector('.main-svg'));
  const notes = Array.from(p.querySelectorAll('.annotation-text')).map(box);
  return {id: p.id, legend: !!legend, overTitle: meet(legend, title),
          overPlot: !!(legend && plot && legend.bottom > plot.top + 1),
          pastEdge: notes.some(n => n.right > edge.right + 1)};
})"""
# Each badge's height against its line: one line, never wrapped inside the badge.
BADGES = """() => Array.from(document.querySelectorAll('.badge')).map(b => {
  const style = getComputedStyle(b);
  return [b.textContent, b.getBoundingClientRect().height, parseFloat(style.lineHeight)];
})"""
# The claims' detail cells: how far right they reach, and any ancestor that scrolls.
DETAIL = """() => Array.from(document.querySelectorAll('table.claims td.detail')).map(td => {
  const scrolls = [];
  for (let el = td.parentElement; el && el !== document.body; el = el.parentElement) {
    const s = getComputedStyle(el);
    if (/(auto|scroll)/.test(s.overflowX + s.overflowY)) scrolls.push(el.className || el.tagName);
  }
  return [td.getBoundingClientRect().right, scrolls];
})"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report of 14 small jobs (a page's test: SQLite only, built once)."""
    return small_jobs_report(
        tmp_path_factory.mktemp("home"),
        JOBS,
        "run-with-a-long-name-{:02d}",
        5,
        lambda i: {"time": f"2026-10-{1 + i:02d}T09:00:00Z"},
    )


def open_at_1280(browser: Any, origin: str, path: str, watch: Watch) -> Any:
    page = open_page(browser, origin, watch, VIEWPORT["width"], VIEWPORT["height"])
    page.goto(f"{origin}{path}", wait_until="load")
    plots = page.locator("div.plot[data-figure]").count()
    if plots:  # every figure drawn
        page.locator(".js-plotly-plot .main-svg").nth(plots - 1).wait_for()
    return page


def assert_figures_laid_out(page: Any) -> None:
    figures = page.evaluate(FIGURE_LAYOUT)
    assert figures and any(f["legend"] for f in figures)
    for fig in figures:
        assert not fig["overTitle"], fig
        assert not fig["overPlot"], fig
        assert not fig["pastEdge"], fig


def assert_badges_on_one_line(page: Any, two_words: bool = True) -> None:
    """No badge wraps; ``two_words``: the page has a NOT REPRODUCED one (the widest)."""
    badges = page.evaluate(BADGES)
    assert badges
    if two_words:
        assert any(text == "NOT REPRODUCED" for text, _, _ in badges)
    for text, height, line in badges:
        assert height < 1.5 * line, (text, height, line)


def test_report_index_badges_legends_and_footnotes(browser: Any, report: Path) -> None:
    watch = Watch()
    page = open_at_1280(browser, "file://", str(report / "index.html"), watch)
    assert page.locator("#cross-job .grid2 .js-plotly-plot").count() == 2  # ref_s0, flash_s0
    assert_figures_laid_out(page)
    assert_badges_on_one_line(page)
    assert watch.problems() == {}


def test_home_sorts_by_a_clicked_column(browser: Any, server: str) -> None:
    watch = Watch()
    page = open_at_1280(browser, server, "/", watch)
    names = "Array.from(document.querySelectorAll('#jobs-table td.name a')).map(a => a.textContent)"
    assert page.evaluate(names) == ["long", "job3", "job2", "job1"]  # newest first
    page.click("#jobs-table th a:text-is('job')")
    page.wait_for_url(f"{server}/?sort=job&order=asc")
    assert page.evaluate(names) == ["job1", "job2", "job3", "long"]
    page.click("#jobs-table th a.current")
    page.wait_for_url(f"{server}/?sort=job&order=desc")
    assert page.evaluate(names) == ["long", "job3", "job2", "job1"]
    assert_figures_laid_out(page)
    assert_badges_on_one_line(page, two_words=False)  # known differences: KNOWN
    assert watch.problems() == {}


@pytest.fixture
def two_studies(cli: Cli, db_url: str, templates: Templates) -> Iterator[str]:
    """``tracker serve`` over the demo jobs (FlashOptim's claims) and a speedrun record."""
    templates.copy_into(db_url, "served", ingest_served_jobs)
    cli("ingest", str(SPEEDRUN))
    with running_server(db_url) as base:
        yield base


# Each claim row's height, the page's, the counts at the top and the claims shown.
CLAIMS_LAYOUT = """() => {
  const rows = Array.from(document.querySelectorAll('table.claims tbody tr'))
    .filter(r => !r.hidden);
  return {rows: rows.map(r => r.getBoundingClientRect().height), line: parseFloat(
            getComputedStyle(document.querySelector('table.claims td')).lineHeight),
          page: document.documentElement.scrollHeight,
          counts: Array.from(document.querySelectorAll('#claims-counts .chip'))
            .map(c => c.textContent),
          groups: rows.map(r => r.dataset.group)};
}"""


def test_claims_one_line_each_with_counts_a_study_and_the_status_in_the_url(
    browser: Any,
    two_studies: str,
) -> None:
    watch = Watch()
    page = open_at_1280(browser, two_studies, "/claims", watch)
    details = page.evaluate(DETAIL)
    assert details
    for right, scrolls in details:
        assert right <= VIEWPORT["width"], right
        assert scrolls == [], scrolls
    assert_badges_on_one_line(page, two_words=False)
    shown = page.evaluate(CLAIMS_LAYOUT)
    rows = shown["rows"]
    assert len(rows) > 80 and set(shown["groups"]) == {"flashoptim", "speedrun"}
    # one line a claim (a badge's padding above it): the page was 110-450 px a row
    assert max(rows) < 2.2 * shown["line"], max(rows)
    assert shown["page"] < sum(rows) + 1500, shown["page"]
    total = sum(int(chip.split()[0]) for chip in shown["counts"])
    assert total == len(rows)
    first = page.locator("table.claims tbody tr").first
    first.locator("summary").click()  # the statement opens on the detail, in the same cell
    assert first.locator("details p").first.is_visible()
    page.select_option("#claims-group", "speedrun")
    alone = page.evaluate(CLAIMS_LAYOUT)
    assert set(alone["groups"]) == {"speedrun"}
    assert sum(int(chip.split()[0]) for chip in alone["counts"]) == len(alone["rows"]) > 0
    page.select_option("#claims-status", "MIXED")
    page.wait_for_url(f"{two_studies}/claims?status=MIXED")
    statuses = page.locator("table.claims .badge").all_text_contents()
    assert statuses and set(statuses) == {"MIXED"}
    assert watch.problems() == {}


def test_trend_draws_one_readable_figure_per_model(browser: Any, server: str) -> None:
    watch = Watch()
    page = open_at_1280(browser, server, "/trend?metric=bpp_state", watch)
    titles = page.locator(".js-plotly-plot .gtitle").all_text_contents()
    assert len(titles) > 1 and all(" of " in title for title in titles)
    colours = page.evaluate(
        "Array.from(document.querySelectorAll('.js-plotly-plot'))"
        ".map(p => p.data.filter(t => t.mode === 'lines+markers').map(t => t.line.color))"
    )
    for per_variant in colours:
        assert len(set(per_variant)) == len(per_variant) > 1
    assert_figures_laid_out(page)
    assert watch.problems() == {}


def test_trend_shades_the_tolerance_band_around_the_expected_value(
    browser: Any,
    server: str,
) -> None:
    watch = Watch()
    page = open_at_1280(browser, server, "/trend?metric=bpp_state&model=gpt-124m", watch)
    legend = page.locator(".js-plotly-plot .legendtext").all_text_contents()
    assert "FlashAdamW: expected \u00b1 tolerance" in legend
    # each band is one filled SVG path with an area, drawn under the lines
    bands = page.evaluate(
        "Array.from(document.querySelectorAll('.js-plotly-plot .scatterlayer .js-fill'))"
        ".map(p => { const b = p.getBBox(); return [b.width, b.height, p.style.fill]; })"
    )
    assert len(bands) >= 4 and all(width > 500 and height > 0 for width, height, _ in bands)
    assert_figures_laid_out(page)
    assert watch.problems() == {}


# A table's width against the box it is in, its headers, and any cell cut short (its text
# wider than the cell).
TABLE_FIT = """selector => {
  const table = document.querySelector(selector);
  const cut = Array.from(table.querySelectorAll('td'))
    .filter(td => td.scrollWidth > td.clientWidth + 1);
  return {width: table.getBoundingClientRect().width, box: table.parentElement.clientWidth,
          right: Math.max(...Array.from(table.querySelectorAll('th'))
            .map(th => th.getBoundingClientRect().right)),
          headers: Array.from(table.tHead.rows[0].cells).map(th => th.textContent.trim()),
          cut: cut.map(td => td.textContent.slice(0, 40))};
}"""


def test_runs_and_compare_fit_1400_px(browser: Any, server: str) -> None:
    watch = Watch()
    page = open_page(browser, server, watch, width=1400)
    page.goto(f"{server}/runs", wait_until="load")
    runs = page.evaluate(TABLE_FIT, "#runs")
    assert runs["width"] <= runs["box"] and runs["right"] <= 1400, runs  # was 1,851 px wide
    assert {"FAIL", "KNOWN", "N/A", "gpu", "notes"} <= set(runs["headers"])
    assert "stopped" not in runs["headers"]  # empty in every row: named above the table
    assert "stopped (empty here)" in page.inner_text("#runs-left-out")
    page.goto(f"{server}/compare?a=job2&b=job3", wait_until="load")
    compare = page.evaluate(TABLE_FIT, "table.comparison")
    assert compare["width"] <= compare["box"] and compare["cut"] == [], compare
    assert watch.problems() == {}
