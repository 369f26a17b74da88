"""The report in a real browser: Debian's chromium, offline, via file:// (Playwright)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import (
    SharedReports,
    Watch,
    open_page,
    open_report_page,
    small_jobs_report,
)
from tests.conftest import Cli
from tracker.sample import write_sample_job

EVIL = "<script>alert(1)</script>"
# traces per drawn figure, in page order (mem_scaling, gpt_trajectories, table4: two bars
# per panel and the legend's neutral swatch)
TRACES = {
    "job1": [5, 5, 5],
    "evil": [6, 5, 5],  # one more variant: the injected one
    "probes": [5, 5],  # no training arms: no trajectories figure
}
# traces per cross-job figure of the demo jobs: bytes/param (5 variants), validation loss
# (ref, flash: linear diverged), then ref_s0, flash_s0, ref_s1 (3 jobs), linear_s0 (2 jobs)
CROSS_JOB_TRACES = [6, 2, 3, 3, 3, 2]  # bytes/param: 5 variants and the red rings


def _evil_job(directory: Path) -> Path:
    write_sample_job(directory, steps=150)
    path = directory / "mem_sweep.json"
    records = json.loads(path.read_text())
    for record in records:
        if record["model"] == "gpt-82m" and record["variant"] == "quant_only":
            record["variant"] = EVIL
        if "error" in record:
            record["error"] = f'{EVIL} <img src=x onerror="alert(2)">'
    path.write_text(json.dumps(records))
    return directory


def ingest_report_jobs(cli: Cli, root: Path) -> None:
    # a regressed flash optimizer state guarantees FAIL verdicts next to PASS ones
    job1 = write_sample_job(root / "job1", seed=5, steps=200, flash_state_shift=0.5)
    cli("ingest", str(job1), "--meta", "gpu=A10G")
    cli("ingest", str(_evil_job(root / "evil")), "--meta", f"note={EVIL}")
    cli("ingest", str(write_sample_job(root / "probes", steps=50, arms=())))


@pytest.fixture
def report_dir(db_url: str, shared_reports: SharedReports) -> Path:
    return shared_reports.report(db_url, "report jobs", ingest_report_jobs)


def traces(page: Any, scope: str = "") -> list[int]:
    """Traces of each drawn figure (within the elements ``scope`` selects), in page order."""
    counts: list[int] = page.evaluate(
        f"Array.from(document.querySelectorAll('{scope} .js-plotly-plot'))"
        ".map(el => el.data.length)"
    )
    return counts


def assert_verdicts_visible(page: Any) -> None:
    assert page.locator("tr.pass span.badge.pass").first.is_visible()
    assert page.locator("tr.fail span.badge.fail").first.is_visible()
    assert page.locator(".chip.fail").first.is_visible()


def test_index_renders_offline(browser: Any, report_dir: Path) -> None:
    watch = Watch()
    # across jobs: bytes/param, validation loss, the arms two jobs share (job1 and evil)
    page = open_report_page(browser, report_dir / "index.html", watch, 6)
    assert len(traces(page, "#cross-job")) == 6
    assert page.locator('section[id^="job-"]').count() == 0  # no job's own figures here
    # the injected variant name is shown literally in the comparison table
    assert page.locator("#compare").get_by_text(EVIL, exact=False).first.is_visible()
    assert page.locator("#jobs-table tbody tr").count() == 3
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert watch.problems() == {}


def test_job_page_renders_offline(browser: Any, report_dir: Path) -> None:
    watch = Watch()
    page = open_report_page(browser, report_dir / "evil" / "index.html", watch, 3)
    assert traces(page) == TRACES["evil"]
    assert_verdicts_visible(page)
    assert page.get_by_text(EVIL, exact=False).first.is_visible()
    assert page.get_by_text('<img src=x onerror="alert(2)">', exact=False).first.is_visible()
    assert watch.problems() == {}


def test_figure_pages_render_offline(browser: Any, report_dir: Path) -> None:
    for name, count in zip(
        ("mem_scaling", "gpt_trajectories", "table4"), TRACES["job1"], strict=True
    ):
        watch = Watch()
        page = open_report_page(browser, report_dir / "job1" / f"{name}.html", watch, 1)
        assert traces(page) == [count], name
        assert watch.problems() == {}, name


def test_cross_job_section_renders_offline(browser: Any, demo_report: Path) -> None:
    watch = Watch()
    page = open_report_page(browser, demo_report / "index.html", watch, len(CROSS_JOB_TRACES))
    assert traces(page, "#cross-job") == CROSS_JOB_TRACES
    # every figure drew its lines
    assert page.evaluate(
        "Array.from(document.querySelectorAll('#cross-job .js-plotly-plot'))"
        ".every(el => el.querySelectorAll('.scatterlayer .trace').length === el.data.length)"
    )
    # the jobs on a time axis, in time order; hover names the job
    names = page.evaluate("document.getElementById('x-bpp').data[0].text")
    assert names == ["job1", "job2", "job3"]
    titles = page.evaluate(
        "Array.from(document.querySelectorAll('#cross-job .gtitle')).map(e => e.textContent)"
    )
    assert any("gpt-124m" in t for t in titles)
    # the comparison: regressions listed on top, their rows highlighted
    compare = page.locator("#compare")
    assert compare.locator(".regressions").is_visible()
    assert compare.get_by_text("bpp_state gpt-124m/flash: PASS -> FAIL", exact=False).is_visible()
    assert compare.locator("tr.regressed span.badge.regressed").first.is_visible()
    assert page.locator("#compare a[href='job3/index.html']").first.is_visible()
    assert watch.problems() == {}


MANY = 60  # past two pages of 25 rows


@pytest.fixture(scope="module")
def many_jobs_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report of MANY small jobs (a page's test, not a database's: SQLite only, built once)."""
    return small_jobs_report(tmp_path_factory.mktemp("many"), MANY, "run{:03d}", 7, _many_jobs_meta)


def _many_jobs_meta(i: int) -> dict[str, str]:
    time = f"2026-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"
    return {"gpu": ("A10G", "H100")[i % 2], "time": time}


def test_index_of_many_jobs_filters_and_pages(browser: Any, many_jobs_report: Path) -> None:
    watch = Watch()
    index = many_jobs_report / "index.html"
    assert index.stat().st_size < 2**20  # a summary, not every job's figures
    # past the first page, rows come hidden: the browser lays out 25 rows, not all of them
    assert len(re.findall(r'<tr class="\w+" hidden>', index.read_text())) == MANY - 25
    page = open_report_page(browser, index, watch, 4, width=1280)  # bpp, val loss, 2 arms
    info = page.locator("#jobs-info")
    visible = "#jobs-table tbody tr:not([hidden])"
    assert page.locator("#jobs-table tbody tr").count() == MANY
    page.wait_for_function("document.getElementById('jobs-info').textContent !== ''")
    assert info.text_content() == f"jobs 1\u201325 of {MANY}"
    assert page.locator(visible).count() == 25
    # newest first (time metadata): the page after the first starts 25 jobs further back
    newest = sorted(range(MANY), key=lambda i: (1 + i // 28 % 12, 1 + i % 28, i % 24), reverse=True)
    assert page.locator(visible).first.locator("td.name").text_content() == f"run{newest[0]:03d}"
    page.click("#jobs-next")
    assert info.text_content() == f"jobs 26\u201350 of {MANY}"
    assert page.locator(visible).first.locator("td.name").text_content() == f"run{newest[25]:03d}"
    page.click("#jobs-prev")
    assert info.text_content() == f"jobs 1\u201325 of {MANY}"

    # the filter: names and metadata; the verdict filter: jobs with a FAIL
    page.fill("#jobs-filter", "run01")
    names = page.locator(f"{visible} td.name").all_text_contents()
    assert sorted(names) == [f"run{i:03d}" for i in range(10, 20)]
    assert info.text_content() == f"jobs 1\u201310 of 10 (filtered from {MANY})"
    page.fill("#jobs-filter", "h100")
    assert info.text_content() == f"jobs 1\u201325 of {MANY // 2} (filtered from {MANY})"
    page.fill("#jobs-filter", "")
    manifest = json.loads((many_jobs_report / "manifest.json").read_text())
    tallies = [entry["tally"] for entry in manifest["jobs"].values()]
    failing = sum(tally["FAIL"] > 0 for tally in tallies)
    passing = sum(tally["FAIL"] == 0 and tally["PASS"] > 0 for tally in tallies)
    assert failing >= MANY // 7  # the regressed jobs at least
    for status, count in (("fail", failing), ("pass", passing)):
        page.select_option("#jobs-status", status)
        assert page.locator(visible).count() == min(25, count)
        assert page.locator(f"{visible}.{status}").count() == min(25, count)
        if count:
            assert info.text_content().startswith(f"jobs 1\u2013{min(25, count)} of {count}")
        else:
            assert info.text_content() == f"no job matches (of {MANY})"

    # the claims across every job, and nothing wider than the window
    assert page.locator("#claims h2").text_content() == f"Claims across {MANY} jobs"
    assert page.locator("#claims table.claims tbody tr").count() > 0
    widths = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], widths
    assert watch.problems() == {}


def test_index_without_javascript_lists_every_job(browser: Any, many_jobs_report: Path) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto((many_jobs_report / "index.html").as_uri(), wait_until="load")
    assert page.locator("#jobs-table tbody tr:visible").count() == MANY
    context.close()


# Only what is drawn by the load event, or for printing: no figure is drawn in a later task.
NO_LATER_TASKS = """
window.setTimeout = function () { return 0; };
window.printedWidths = [];
matchMedia('print').addEventListener('change', function (media) {
  if (!media.matches) return;
  window.printedWidths.push([...document.querySelectorAll('div.plot')].map(function (p) {
    var svg = p.querySelector('.main-svg');
    return svg ? Number(svg.getAttribute('width')) : 0;
  }));
});
"""
DRAWN = "[...document.querySelectorAll('div.plot')].map(p => !!p.querySelector('.main-svg'))"


def page_without_later_tasks(browser: Any, path: Path, height: int) -> Any:
    page = open_page(browser, "file://", Watch(), height=height, init_script=NO_LATER_TASKS)
    page.goto(path.as_uri(), wait_until="load")
    return page


def test_a_screenshot_on_load_shows_every_figure_on_screen(
    browser: Any, report_dir: Path, tmp_path: Path
) -> None:
    tall = page_without_later_tasks(browser, report_dir / "job1" / "index.html", 6000)
    assert tall.evaluate(DRAWN) == [True, True, True]  # all on the first screen: drawn
    assert tall.screenshot(path=str(tmp_path / "job1.png"))  # before any scroll
    short = page_without_later_tasks(browser, report_dir / "job1" / "index.html", 600)
    assert short.evaluate(DRAWN) == [False, False, False]  # below the first screen: later


@pytest.mark.parametrize("page_path", ["index.html", "job1/index.html"])
def test_printing_draws_every_figure_to_the_page_width(
    browser: Any, report_dir: Path, tmp_path: Path, page_path: str
) -> None:
    page = page_without_later_tasks(browser, report_dir / page_path, 600)
    drawn = page.evaluate(DRAWN)
    assert drawn and not any(drawn)  # nothing on the first screen: nothing drawn yet
    assert page.pdf(path=str(tmp_path / "printed.pdf"))
    assert all(page.evaluate(DRAWN))
    (widths,) = page.evaluate("window.printedWidths")
    assert len(widths) == len(drawn) and all(0 < width <= 680 for width in widths), widths
    screen = page.evaluate(
        "[...document.querySelectorAll('.main-svg')].map(s => s.getAttribute('width'))"
    )
    assert max(map(int, screen)) > 680  # back to the screen's width after printing
