"""The plot page in Chromium, against a real ``tracker serve``: three runs of two jobs ticked
in the runs table (drawn below it), smoothing and log y set, zoomed, against the step and the
wall time; the URL holds the view, so a reload draws it again, and its CSV is ``query
curve``'s points."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.browser.conftest import SAFETY_S, Watch, open_page
from tests.conftest import Cli

RUNS = "run=job2/flash_s0&run=job2/ref_s0&run=job3/ref_s0"  # in the runs table's order
CHOSEN = ("job2/flash_s0", "job2/ref_s0", "job3/ref_s0")
SHOT = os.environ.get("TRACKER_PLOT_SCREENSHOT")  # where to keep a screenshot, for a look


def drawn(page: Any) -> None:
    page.wait_for_selector("#plot[data-loading='false']", timeout=SAFETY_S * 1000)


def view(page: Any) -> dict[str, Any]:
    shown: dict[str, Any] = page.evaluate(
        """(() => {
          const div = document.getElementById('plot');
          return {
            traces: div.data.map(t => [t.name, t.opacity ?? 1, Array.from(t.x), Array.from(t.y)]),
            yaxis: div.layout.yaxis.type,
            range: div.layout.xaxis.range,
            xtitle: div.layout.xaxis.title.text,
          };
        })()"""
    )
    return shown


def drag(page: Any, start: float, stop: float) -> None:
    """Drag across the plot, from and to these fractions of its width."""
    box = page.locator("#plot .nsewdrag").bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * stop, y, steps=8)
    page.mouse.up()


def csv_is_query_curve(cli: Cli, page: Any, low: float, high: float) -> None:
    """The page's CSV link: the chosen runs' points from ``low`` to ``high``, every one
    (a window of fewer than 2,000 steps), as ``query curve`` gives them, ``--ema`` smoothed."""
    ok, text = page.evaluate(
        "fetch(document.getElementById('plot-csv').href).then(async r => [r.ok, await r.text()])"
    )
    assert ok
    rows = list(csv.DictReader(io.StringIO(text)))
    expected = []
    for run in CHOSEN:
        job, arm = run.split("/")
        args = ("query", "curve", "--job", job, "--arm", arm, "--ema", "0.1", "--format", "json")
        expected += [(run, p) for p in json.loads(cli(*args).stdout) if low <= p["step"] <= high]
    assert len(rows) == len(expected) > 0

    def number(value: Any) -> float:
        return math.nan if value in (None, "", "nan", "NaN") else float(value)

    for row, (run, point) in zip(rows, expected, strict=True):
        assert (f"{row['job']}/{row['arm']}", int(row["step"])) == (run, point["step"])
        pairs = ((row["value"], point["value"]), (row["smoothed"], point["ema"]))
        for got, want in ((number(g), number(w)) for g, w in pairs):
            assert (math.isnan(got) and math.isnan(want)) or math.isclose(got, want, rel_tol=1e-12)


def test_plot_view_survives_a_reload(browser: Any, server: str, cli: Cli) -> None:
    watch = Watch()
    page = open_page(browser, server, watch)
    page.goto(f"{server}/runs?columns=job,arm,nonfinite&job=job2&job=job3", wait_until="load")
    assert page.locator("#runs-plot-figure").is_hidden()
    for run in CHOSEN:
        page.check(f"#runs input[name=run][value='{run}']")
    # drawn below the table, as the link opens them (a selector, not wait_for_function: the
    # page's CSP forbids the eval that one uses)
    page.wait_for_selector(
        "#runs-plot[data-traces='3'][data-loading='false']",
        state="attached",
        timeout=SAFETY_S * 1000,
    )
    below = page.evaluate("document.getElementById('runs-plot').data.map(t => t.name)")
    assert below == list(CHOSEN)
    page.click("#plot-link")
    page.wait_for_url(f"{server}/plot?{RUNS}&metric=loss")
    drawn(page)
    assert page.locator("#plot").get_attribute("data-traces") == "3"  # raw only

    page.locator("#plot-smooth").fill("0.9")
    drawn(page)
    assert page.locator("#plot").get_attribute("data-traces") == "6"  # raw and smoothed
    page.check("#plot-log")
    drawn(page)
    # a log axis within a decade: ticks between the powers of ten, one at the lowest value
    ticks, lowest = page.evaluate(
        "(() => { const d = document.getElementById('plot');"
        " const ys = d.data.flatMap(t => Array.from(t.y)).filter(v => isFinite(v) && v > 0);"
        " return [d.layout.yaxis.tickvals, Math.min(...ys)]; })()"
    )
    assert len(ticks) >= 4 and 0.9 * lowest <= min(ticks) <= lowest, (ticks, lowest)
    drag(page, 0.30, 0.60)
    page.wait_for_url("**end=*")
    drawn(page)

    before = view(page)
    low, high = before["range"]
    assert 0 < low < high < 300 and before["yaxis"] == "log"  # the demo's 300 steps
    assert before["xtitle"] == "step"
    assert low == int(low) and high == int(high)  # the steps asked for: the URL's
    names = [(name, opacity) for name, opacity, _, _ in before["traces"]]
    assert names == [
        (run, opacity)
        for run in CHOSEN
        for opacity in (0.25, 0.85)  # raw faint behind the smoothed line, itself see-through
    ]
    assert all(low <= x <= high for _, _, xs, _ in before["traces"] for x in xs)
    url = page.url
    assert url == f"{server}/plot?{RUNS}&metric=loss&smooth=0.9&y=log&start={low}&end={high}"
    csv_is_query_curve(cli, page, low, high)

    page.reload(wait_until="load")
    drawn(page)
    assert page.url == url
    assert view(page) == before
    assert page.locator("#plot-log").is_checked()
    assert page.locator("#plot-smooth").input_value() == "0.9"

    page.select_option("#plot-group", "variant")
    drawn(page)
    page.check("#plot-band")
    drawn(page)
    means = page.evaluate(
        "document.getElementById('plot').data.filter(t => t.showlegend !== false).map(t => t.name)"
    )
    assert means == ["variant=flash (1 run)", "variant=ref (2 runs)"]
    assert page.locator("#plot").get_attribute("data-traces") == "6"  # a band: two edges each
    # every band first, see-through in its group's colour, then the means above them all
    layers = page.evaluate(
        "document.getElementById('plot').data"
        ".map(t => [t.showlegend !== false, t.fillcolor || null, t.line.color])"
    )
    fills = [fill for _, fill, _ in layers if fill]
    assert len(set(fills)) == 2 and all(
        f.startswith("rgba(") and f.endswith(",0.18)") for f in fills
    )
    assert [mean for mean, _, _ in layers] == [False] * 4 + [True] * 2
    assert len({colour for mean, _, colour in layers if mean}) == 2
    assert page.url.endswith("&group=variant&band=1")
    if SHOT:
        page.screenshot(path=SHOT, full_page=True)
    assert watch.problems() == {}


def test_a_wall_time_view_survives_a_reload(browser: Any, server: str) -> None:
    watch = Watch()
    page = open_page(browser, server, watch)
    page.goto(f"{server}/plot?{RUNS}&smooth=0.5", wait_until="load")
    drawn(page)
    page.select_option("#plot-x", "time")
    page.wait_for_url("**x=time*")
    drawn(page)
    whole = view(page)
    assert whole["xtitle"] == "wall time (s)"
    longest = max(max(xs) for _, _, xs, _ in whole["traces"])
    drag(page, 0.40, 0.70)
    page.wait_for_url("**end_s=*")
    drawn(page)

    before = view(page)
    asked = parse_qs(urlsplit(page.url).query)
    low, high = before["range"]
    assert [low, high] == [float(asked["start_s"][0]), float(asked["end_s"][0])]
    assert 0 < low < high < longest and "start" not in asked  # seconds, not steps
    assert all(low <= x <= high for _, _, xs, _ in before["traces"] for x in xs)
    assert len(before["traces"]) == 6 and all(xs for _, _, xs, _ in before["traces"])
    url = page.url
    assert url == f"{server}/plot?{RUNS}&smooth=0.5&x=time&start_s={asked['start_s'][0]}" + (
        f"&end_s={asked['end_s'][0]}"
    )

    page.reload(wait_until="load")
    drawn(page)
    assert page.url == url
    assert view(page) == before
    assert page.locator("#plot-x").input_value() == "time"
    page.select_option("#plot-x", "step")  # back to steps: the whole curves again
    page.wait_for_url(f"{server}/plot?{RUNS}&smooth=0.5")
    drawn(page)
    assert view(page)["xtitle"] == "step" and view(page)["range"][1] > 250
    assert watch.problems() == {}
