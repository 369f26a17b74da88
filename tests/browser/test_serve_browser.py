"""``tracker serve`` as a user meets it: a real uvicorn process, Debian's chromium (Playwright).

The server is started on port 0 and used once its "Uvicorn running on" line names the port:
every wait is for an event (a line, a page load, a drawn plot, an answer), never a pause.
"""

from __future__ import annotations

from typing import Any

from tests.browser.conftest import LONG_STEPS, SAFETY_S, Watch, open_page

WINDOW = 2000  # points the explorer asks for


def drawn_figures(page: Any, count: int) -> None:
    # selectors, not wait_for_function: the page's CSP forbids the eval that one uses
    page.locator(".js-plotly-plot").nth(count - 1).wait_for(timeout=SAFETY_S * 1000)


def test_list_job_and_comparison(browser: Any, server: str) -> None:
    watch = Watch()
    page = open_page(browser, server, watch)
    page.goto(f"{server}/", wait_until="load")
    names = page.evaluate(
        "Array.from(document.querySelectorAll('#jobs td.name a')).map(a => a.textContent)"
    )
    assert names == ["long", "job3", "job2", "job1"]  # newest first, as in the report
    assert page.locator("#claims").is_visible()
    page.fill("#jobs-filter", "0.1.1")  # job3's metadata: the server filters its table
    page.press("#jobs-filter", "Enter")
    page.wait_for_url(f"{server}/?sort=time&order=desc&q=0.1.1&status=")
    assert page.locator("#jobs tbody tr").count() == 1
    page.select_option("#jobs-status", "fail")  # sent again as it changes
    page.wait_for_url(f"{server}/?sort=time&order=desc&q=0.1.1&status=fail")

    page.click("#jobs a:text-is('job3')")
    page.wait_for_url(f"{server}/jobs/job3/")
    drawn_figures(page, 3)
    assert page.locator("tr.fail span.badge.fail").first.is_visible()
    assert page.locator("tr.pass span.badge.pass").first.is_visible()

    page.click("#compare-previous")
    page.wait_for_url(f"{server}/compare?a=job2&b=job3")
    assert page.get_by_text("bpp_state gpt-124m/flash: PASS -> FAIL", exact=False).is_visible()
    assert page.locator("tr.regressed span.badge.regressed").first.is_visible()
    assert watch.problems() == {}


def points_between(page: Any, steps: str, low: int, high: int) -> int:
    counted: int = page.evaluate(f"{steps}.filter(s => s >= {low} && s <= {high}).length")
    return counted


def test_zoom_draws_the_raw_points(browser: Any, server: str) -> None:
    watch = Watch()
    page = open_page(browser, server, watch)
    page.goto(f"{server}/curve?job=long&arm=ref_s0", wait_until="load")
    page.wait_for_selector("#explorer[data-loading='false']", timeout=SAFETY_S * 1000)
    explorer = page.locator("#explorer")
    assert explorer.get_attribute("data-raw") == "false"
    assert int(explorer.get_attribute("data-drawn") or 0) <= WINDOW

    page.evaluate("window.overview = Array.from(document.getElementById('explorer').data[0].x)")
    # drag a zoom box across 4% of the plot's width: about 800 of the 20,000 steps
    box = page.locator("#explorer .nsewdrag").bounding_box()
    y = box["y"] + box["height"] / 2
    start, end = box["x"] + box["width"] * 0.40, box["x"] + box["width"] * 0.44
    page.mouse.move(start, y)
    page.mouse.down()
    page.mouse.move(end, y, steps=8)
    page.mouse.up()
    page.wait_for_selector(
        "#explorer[data-loading='false'][data-raw='true']", timeout=SAFETY_S * 1000
    )
    low, high = page.evaluate(
        "document.getElementById('explorer').layout.xaxis.range.map(Math.round)"
    )
    assert 0 < low < high < LONG_STEPS and high - low < WINDOW
    drawn = int(explorer.get_attribute("data-drawn") or 0)
    inside = points_between(page, "document.getElementById('explorer').data[0].x", low, high)
    before = points_between(page, "window.overview", low, high)
    assert inside == high - low + 1  # every step of the window is a point now
    assert inside > 5 * before  # where the overview had a few of them
    assert drawn >= inside
    status = page.locator("#explorer-status").text_content() or ""
    assert "every raw point" in status
    # plotly computed every one of them for drawing
    assert page.evaluate("document.getElementById('explorer').calcdata[0].length") == drawn
    assert watch.problems() == {}


def test_docs_draws_the_api_and_runs_it(browser: Any, server: str) -> None:
    watch = Watch()
    page = open_page(browser, server, watch)
    page.goto(f"{server}/docs", wait_until="load")
    jobs = page.locator(".opblock", has=page.locator("[data-path='/api/jobs']"))
    jobs.wait_for(timeout=SAFETY_S * 1000)
    assert page.locator("[data-path='/api/curve']").is_visible()

    jobs.locator(".opblock-summary-control").click()  # try /api/jobs from the page
    jobs.get_by_role("button", name="Try it out").click()
    jobs.get_by_role("button", name="Execute").click()
    answer = jobs.locator(".live-responses-table .response")
    answer.wait_for(timeout=SAFETY_S * 1000)
    assert answer.locator(".response-col_status").inner_text().strip() == "200"
    assert '"job": "long"' in answer.locator(".response-col_description").inner_text()
    # watch.console holds any Content-Security-Policy refusal; watch.network any other origin
    assert watch.problems() == {}


def cells(page: Any, column: int) -> list[str]:
    found: list[str] = page.evaluate(
        f"Array.from(document.querySelectorAll('#runs tbody tr'))"
        f".map(r => r.children[{column}].textContent)"
    )
    return found


def test_runs_table_sorts_filters_and_plots_the_ticked(browser: Any, server: str) -> None:
    watch = Watch()
    page = open_page(browser, server, watch)
    page.goto(f"{server}/runs?columns=job,arm,final_loss", wait_until="load")
    shown = cells(page, 1)
    assert {"job1", "job2", "job3", "long"} == set(shown)
    assert page.locator("#runs-count").inner_text().startswith(f"{len(shown)} runs")
    header = page.locator("#runs th a.sort", has_text="final_loss")  # final_<wbr>loss
    header.click()
    page.wait_for_url(f"{server}/runs?columns=job%2Carm%2Cfinal_loss&sort=final_loss")
    losses = [float(v) for v in cells(page, 3) if v not in ("NaN", "\u2014")]
    assert len(losses) >= 9 and losses == sorted(losses)
    header.click()  # again: descending
    page.wait_for_url("**sort=-final_loss")
    ordered = [float(v) for v in cells(page, 3) if v not in ("NaN", "\u2014")]
    assert ordered == sorted(losses, reverse=True)

    page.fill("#runs-view input[name=q]", "job3")
    page.press("#runs-view input[name=q]", "Enter")
    page.wait_for_url("**q=job3**")
    assert cells(page, 1) == ["job3"] * shown.count("job3")
    # a visible button, greyed until runs are ticked
    assert page.locator("#plot-link").get_attribute("aria-disabled") == "true"
    arms = cells(page, 2)
    boxes = page.locator("#runs input[name=run]")
    boxes.nth(0).check()
    boxes.nth(2).check()
    link = page.locator("#plot-link")
    assert link.is_visible() and link.get_attribute("aria-disabled") == "false"
    assert link.get_attribute("href") == (
        f"/plot?run=job3/{arms[0]}&run=job3/{arms[2]}&metric=loss"
    )
    assert watch.problems() == {}
