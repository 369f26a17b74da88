"""Runs that tell their story, in Chromium against a real ``tracker serve``: the job page
lists each arm's notes, the runs table marks noted runs with a badge and filters on
``notes=resumed`` and ``val_loss<...``, and the plot draws a NaN stretch as a gap with a cross
and an eval-every-125-steps curve with markers. ``TRACKER_NOTES_SCREENSHOTS=DIR`` keeps
screenshots of the three pages, for a look."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import SAFETY_S, Watch, open_page
from tests.conftest import Cli
from tests.live_server import running_server

DATA = Path(__file__).parent.parent / "data"
SHOTS = os.environ.get("TRACKER_NOTES_SCREENSHOTS")


@pytest.fixture
def server(cli: Cli) -> Iterator[str]:
    for name in ("resumed", "restarted", "modded_nanogpt"):
        cli("ingest", str(DATA / name))
    with running_server(cli.url) as base:
        yield base


def shot(page: Any, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def test_notes_on_the_job_page_runs_table_and_plot(browser: Any, server: str) -> None:
    watch = Watch()
    page = open_page(browser, server, watch)
    page.goto(f"{server}/jobs/modded_nanogpt/", wait_until="load")
    page.locator(".js-plotly-plot").first.wait_for(timeout=SAFETY_S * 1000)
    notes = page.locator("li", has_text="flash_s0: loss not finite at steps 140-146")
    assert notes.count() == 1 and notes.first.is_visible()
    shot(page, "job")

    page.goto(f"{server}/runs", wait_until="load")
    badges = page.locator("#runs td.notes .note-badge")
    assert badges.count() == 4  # resumed, restarted, and both arms of modded_nanogpt
    plot = page.locator("#plot-link")  # a button: greyed, then live once runs are ticked
    assert plot.is_visible() and plot.get_attribute("aria-disabled") == "true"
    page.locator("#runs input[name=run]").first.check()
    assert plot.get_attribute("aria-disabled") == "false"
    right = "Array.from(document.querySelectorAll('#runs th'))"
    right += ".map(th => th.getBoundingClientRect().right)"
    assert max(page.evaluate(right)) <= 1400  # no column cut off at 1,400 px
    page.fill("input[aria-label='where']", "notes=resumed")
    page.click("#runs-view button[type=submit]")
    page.wait_for_url("**/runs?**")
    rows = page.evaluate("Array.from(document.querySelectorAll('#runs tbody tr')).length")
    assert rows == 1 and "resumed at step 1500, 200 steps replaced" in page.inner_text("#runs")
    page.goto(f"{server}/runs", wait_until="load")
    shot(page, "runs")

    runs = "run=modded_nanogpt/flash_s0&run=modded_nanogpt/ref_s0"
    page.goto(f"{server}/plot?{runs}&smooth=0.6", wait_until="load")
    page.wait_for_selector("#plot[data-loading='false']", timeout=SAFETY_S * 1000)
    shown = "Array.from(document.getElementById('plot').data)"
    shown += ".map(t => [t.name, t.mode, t.text || null])"
    traces = page.evaluate(shown)
    crosses = [t for t in traces if t[0].endswith("not finite")]
    assert crosses == [
        [
            "modded_nanogpt/flash_s0 not finite",
            "markers",
            [
                "modded_nanogpt/flash_s0: loss NaN at steps 140-146",
                "modded_nanogpt/flash_s0: loss NaN at steps 200-203",
            ],
        ]
    ]
    shot(page, "plot")
    page.goto(f"{server}/plot?{runs}&metric=val_loss&smooth=0.9&smooth_by=point", wait_until="load")
    page.wait_for_selector("#plot[data-loading='false']", timeout=SAFETY_S * 1000)
    modes = page.evaluate("Array.from(document.getElementById('plot').data).map(t => t.mode)")
    assert "lines+markers" in modes  # eval every 125 steps: its points are marked
    assert page.locator("#plot-smooth-by").input_value() == "point"
    shot(page, "plot_sparse")
    # an EMA per step at 125-step gaps (0.9 ** 125) would only redraw the points: none drawn
    page.goto(f"{server}/plot?{runs}&metric=val_loss&smooth=0.9", wait_until="load")
    page.wait_for_selector("#plot[data-loading='false']", timeout=SAFETY_S * 1000)
    modes = page.evaluate("Array.from(document.getElementById('plot').data).map(t => t.mode)")
    assert modes == ["lines+markers", "lines+markers"]

    # a mistyped metric: said on the page, the runs' metrics offered, then drawn
    resumed = "run=resumed/flash_s0&run=resumed/ref_s0"
    page.goto(f"{server}/plot?{resumed}&metric=los", wait_until="load")
    assert "did you mean loss?" in page.inner_text("#plot-status")
    options = page.locator("#plot-metric option").all_text_contents()
    assert "loss" in options and "lr" in options
    page.select_option("#plot-metric", "loss")
    page.wait_for_selector("#plot[data-traces='3'][data-loading='false']", timeout=SAFETY_S * 1000)
    # the resumed run is marked at its resume step, its note the hover text
    marks = page.evaluate(
        "Array.from(document.getElementById('plot').data)"
        ".filter(t => t.name.endsWith(' resumed')).map(t => [Array.from(t.x), t.text])"
    )
    assert marks == [[[1500], ["resumed/flash_s0: resumed at step 1500, 200 steps replaced"]]]
    shot(page, "plot_resumed")
    assert watch.errors == [] and watch.network == []
