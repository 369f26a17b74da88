"""The live home, claims and trend pages (and the report's index sharing their templates):
jobs newest first with verdict counts, sorted by the column the URL names; claims not
reproduced first, filtered by status, with every column named for people; one trend figure
per model with a colour per variant; metadata from the database inert. Both backends."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tracker.analysis.expectations import load_expectations
from tracker.domain import ClaimStatus, Status
from tracker.models import Job
from tracker.queries.compare import compare_in_study, compare_jobs
from tracker.queries.selection import JobSelection, selected_jobs
from tracker.queries.yardsticks import kept_verdicts
from tracker.store.schema import open_database
from tracker.views import across_jobs
from tracker.views.home import jobs_page, latest_verdicts
from tracker.views.pages import JobRow
from tracker.views.values import CLAIM_ORDER

STEPS = 300
HOSTILE = "<script>alert(1)</script>&\"'"
NOTE = f"note={HOSTILE}"
JOBS = {
    "j1": ({"seed": 0}, ["time=2026-10-01T00:00:00Z", "gpu=A10G", NOTE]),
    "j3": ({"seed": 2, "flash_state_shift": 0.5}, ["time=2026-11-01T00:00:00Z", "gpu=A10G", NOTE]),
    "j2": ({"seed": 1, "failed_probe": None}, ["time=2026-10-15T00:00:00Z", "gpu=L4", NOTE]),
}
ROW = re.compile(
    r'<tr class="(\w+)"[^>]*><td class="name"><a href="([^"]+)">([^<]+)</a></td>'
    r'<td class="time">[^<]*</td>((?:<td class="num[^"]*">\d+</td>)+)'
)
NUM = re.compile(r'<td class="num[^"]*">(\d+)</td>')


# the jobs table's verdict columns, in page order
COUNTED = (Status.FAIL, Status.PASS, Status.KNOWN, Status.NA)


def job_rows(html: str) -> list[tuple[str, dict[str, int]]]:
    """(job, {FAIL, PASS, KNOWN, N/A: count}) of each row of the jobs table, in page order."""
    table = html[html.index('id="jobs-table"') :]
    rows = []
    for _, _, name, cells in ROW.findall(table):
        numbers = [int(n) for n in NUM.findall(cells)]
        rows.append((name, dict(zip(COUNTED, numbers, strict=False))))
    return rows


def verdict_counts(client: TestClient, job: str) -> dict[str, int]:
    verdicts = client.get(f"/api/jobs/{job}").json()["verdicts"]
    return {s: sum(v["status"] == s for v in verdicts) for s in COUNTED}


def test_home_lists_jobs_newest_first_with_their_verdict_counts(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    rows = job_rows(response.text)
    assert [name for name, _ in rows] == ["j3", "j2", "j1"]
    for name, counts in rows:
        assert counts == verdict_counts(client, name)
    assert dict(rows)["j3"][Status.FAIL] > 0  # the shifted job fails its bytes/param
    assert 'id="cross-job"' in response.text  # the report's figures across jobs
    assert 'data-figure="x-bpp-data"' in response.text


@pytest.mark.parametrize(
    ("query", "key", "descending"),
    [
        ("sort=fail&order=desc", lambda row: row[1][Status.FAIL], True),
        ("sort=pass&order=asc", lambda row: row[1][Status.PASS], False),
        ("sort=job&order=asc", lambda row: row[0], False),
        ("sort=job&order=desc", lambda row: row[0], True),
        ("sort=time&order=asc", lambda row: {"j1": 1, "j2": 2, "j3": 3}[row[0]], False),
    ],
)
def test_home_sorts_by_the_column_the_url_names(
    client: TestClient, query: str, key: Any, descending: bool
) -> None:
    rows = job_rows(client.get(f"/?{query}").text)
    assert len(rows) == 3
    assert rows == sorted(rows, key=key, reverse=descending)
    column = query.split("&")[0].split("=")[1]
    html = client.get(f"/?{query}").text
    # the sorted column's header says so and links to the other direction
    other = "asc" if descending else "desc"
    assert f'class="sort current" href="?sort={column}&amp;order={other}"' in html


def listed(names: str, status: str = "pass") -> list[JobRow]:
    return [
        JobRow(name, f"/jobs/{name}/", "2026-11-01T00:00:00Z", {}, 0, 0, f"gpu={name[-1]}", status)
        for name in names.split()
    ]


def test_a_page_of_the_jobs_table_holds_the_matching_rows_in_their_order() -> None:
    rows = listed("a1 b2 c3 d4", "pass") + listed("e5", "fail")
    page = jobs_page(rows, "", "", 2, 2)
    assert [row.name for row in page.rows] == ["c3", "d4"]
    assert (page.first, page.matching, page.total, page.page, page.pages) == (3, 5, 5, 2, 3)
    last = jobs_page(rows, "", "", 9, 2)  # past the last page: the last
    assert ([row.name for row in last.rows], last.page, last.first) == (["e5"], 3, 5)
    assert [row.name for row in jobs_page(rows, "GPU=3", "", 1, 2).rows] == ["c3"]
    assert [row.name for row in jobs_page(rows, "2026 gpu=5", "fail", 1, 2).rows] == ["e5"]
    none = jobs_page(rows, "h100", "", 1, 2)
    assert (none.rows, none.first, none.matching, none.page, none.pages) == ([], 0, 0, 1, 1)


def test_home_filters_and_pages_its_jobs_table_on_the_server(client: TestClient) -> None:
    """The server sends one page of the jobs table, of the jobs matching its filter (a form,
    without JavaScript too); the sort links keep the filter."""
    html = client.get("/?q=l4").text
    assert [name for name, _ in job_rows(html)] == ["j2"]
    assert 'id="jobs-info" class="muted">jobs 1&ndash;1 of 1 (filtered from 3)</span>' in html
    assert '<input type="search" id="jobs-filter" name="q" value="l4"' in html
    assert 'href="?sort=job&amp;order=asc&amp;q=l4&amp;status="' in html
    assert "3 jobs, " in html  # the summary counts every job
    failing = job_rows(client.get("/?status=fail").text)
    assert failing and all(counts[Status.FAIL] for _, counts in failing)
    assert '<option value="fail" selected>' in client.get("/?status=fail").text
    empty = client.get("/?q=nothing+like+it").text
    assert job_rows(empty) == [] and "no job matches (of 3)" in empty
    assert "No jobs in the database yet" not in empty
    assert client.get("/?page=0").text == (
        "Error: bad parameter 'page': Input should be greater than or equal to 1\n"
    )


def test_home_refuses_an_unknown_sort_column(client: TestClient) -> None:
    response = client.get("/?sort=nope")
    assert response.status_code == 422
    assert response.text == (
        "Error: bad parameter 'sort': Input should be 'job', 'time', 'fail', 'pass', 'known', "
        "'na', 'probes', 'arms' or 'metadata'\n"
    )


def claim_statuses(html: str, table_class: str = "claims") -> list[str]:
    """The badges of the claims table (``claims known-claims``: the known differences')."""
    start = html.find(f'<table class="{table_class}">')
    if start < 0:
        return []
    table = html[start:]
    table = table[: table.index("</table>")]
    return [
        s.replace(" ", "_") for s in re.findall(r'<span class="badge \w+">([A-Z ]+)</span>', table)
    ]


def test_claims_come_not_reproduced_first(client: TestClient) -> None:
    html = client.get("/claims").text
    statuses = claim_statuses(html)
    known = claim_statuses(html, "claims known-claims")
    assert set(known) <= {"KNOWN"}  # every job KNOWN: under their own heading
    assert len(statuses) + len(known) == len(client.get("/api/claims").json())
    rank = [CLAIM_ORDER.index(s) for s in statuses]
    assert rank == sorted(rank)
    assert len(set(statuses)) >= 2  # the order is tested on more than one status


def test_the_api_claims_stay_in_their_order(client: TestClient, study: Cli) -> None:
    assert client.get("/api/claims").json() == json.loads(
        study("claims", "--format", "json").stdout
    )


@pytest.mark.parametrize("status", list(ClaimStatus))
def test_claims_filter_by_status(client: TestClient, status: ClaimStatus) -> None:
    rows = [row for row in client.get("/api/claims").json() if row["status"] == status]
    expected = sum(not row["known"] for row in rows)
    html = client.get(f"/claims?status={status}").text
    assert claim_statuses(html) == [status.value] * expected
    assert len(claim_statuses(html, "claims known-claims")) == len(rows) - expected
    if not rows:
        assert f"No claim is {status}." in html
    assert f'<option value="{status}" selected>' in html


def test_claims_status_any_and_bad_status(client: TestClient) -> None:
    assert client.get("/claims?status=").status_code == 200  # the form's "any"
    response = client.get("/claims?status=FINE")
    assert response.status_code == 422
    assert response.text.startswith("Error: bad parameter 'status': Input should be 'REPRODUCED'")


@pytest.mark.parametrize("path", ["/claims", "/claims?group_by=gpu", "/"])
def test_claims_columns_have_human_names_and_the_detail(client: TestClient, path: str) -> None:
    html = client.get(path).text
    head = html[html.index('<table class="claims"') :]
    head = head[: head.index("</thead>")]
    names = re.findall(r"<th[^>]*>([^<]+)</th>", head)
    assert names[-7:] == [
        "claim", "subject", "estimate", "expected &plusmn; tol.", "jobs", "failing",
        "statement and detail",
    ]  # fmt: skip
    assert not {"ci_low", "ci_high", "n_jobs", "n_samples", "jobs_failing"} & set(names)
    assert ("group" in names) == ("group_by" in path)
    section = html[html.index('id="claims"') :]
    section = section[: section.index("</section>")]
    assert 'class="detail">' in section and 'class="scroll"' not in section


def test_the_report_index_orders_its_claims_too(study: Cli, tmp_path: Path) -> None:
    out = tmp_path / "report"
    study("report", "--out", str(out))
    html = (out / "index.html").read_text()
    rank = [CLAIM_ORDER.index(s) for s in claim_statuses(html)]
    assert rank and rank == sorted(rank)
    claims = json.loads((out / "claims.json").read_text())
    assert claims == json.loads(study("claims", "--format", "json").stdout)  # as judged


def figures(html: str) -> list[dict[str, Any]]:
    found = re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', html)
    return [json.loads(text) for text in found]


def test_trend_draws_one_figure_per_model_and_a_colour_per_variant(client: TestClient) -> None:
    table = client.get("/api/trend?metric=bpp_state").json()
    models = list(dict.fromkeys(row["model"] for row in table))
    drawn = figures(client.get("/trend?metric=bpp_state").text)
    assert len(drawn) == len(models) > 1
    for model, fig in zip(models, drawn, strict=True):
        assert model in fig["layout"]["title"]["text"]
        variants = {row["variant"] for row in table if row["model"] == model}
        values = [trace for trace in fig["data"] if trace["mode"] == "lines+markers"]
        colours = [trace["line"]["color"] for trace in values]
        assert len(values) == len(variants)
        assert len(set(colours)) == len(colours)
        assert fig["layout"]["xaxis"]["type"] == "date"
        assert fig["layout"]["legend"]["yref"] == "container"  # under the title, not over it


def test_trend_draws_the_expected_value_and_its_tolerance_band(client: TestClient) -> None:
    table = client.get("/api/trend?metric=bpp_state&model=gpt-124m").json()
    by_variant = {row["variant"]: row for row in table}
    # the study's analytic optimizer state and its 0.05 B/param either side
    assert [by_variant["flash"][k] for k in ("expected", "tolerance_lower", "tolerance_upper")] == [
        3.125,
        3.075,
        3.175,
    ]
    (fig,) = figures(client.get("/trend?metric=bpp_state&model=gpt-124m").text)
    traces = {trace["name"]: trace for trace in fig["data"]}
    line, band = traces["FlashAdamW: expected \u00b1 tolerance"], traces["FlashAdamW: tolerance"]
    assert band["showlegend"] is False and band["legendgroup"] == line["legendgroup"]
    jobs = [row for row in table if row["variant"] == "flash"]
    assert line["y"] == [3.125] * len(jobs) and line["line"]["dash"] == "dot"
    assert band["fill"] == "toself"
    assert band["y"] == [3.175] * len(jobs) + [3.075] * len(jobs)  # upper edge, lower back
    assert band["line"]["width"] == 0 and line["line"]["color"] == band["fillcolor"]
    assert "tolerance %{customdata[0]:.6g} to %{customdata[1]:.6g}" in line["hovertemplate"]
    assert line["customdata"] == [[3.075, 3.175]] * len(jobs)


def test_trend_without_expectations_draws_no_band(client: TestClient) -> None:
    table = client.get("/api/trend?metric=peak_bpp").json()
    assert table and {row["expected"] for row in table} == {None}
    for fig in figures(client.get("/trend?metric=peak_bpp").text):
        assert all(trace["mode"] == "lines+markers" for trace in fig["data"])


@pytest.mark.parametrize(
    "path", ["/", "/?sort=metadata", "/claims?group_by=note", "/trend?group_by=note"]
)
def test_a_hostile_metadata_value_stays_inert(client: TestClient, path: str) -> None:
    html = client.get(path).text
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;" in html


ISO_UTC = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"  # 2026-11-29T21:13:57Z, the README's one format


def test_every_page_shows_times_in_one_format(
    client: TestClient, study: Cli, tmp_path: Path
) -> None:
    home = client.get("/").text
    assert re.findall(r'<td class="time">([^<]*)</td>', home) == [
        "2026-11-01T00:00:00Z",
        "2026-10-15T00:00:00Z",
        "2026-10-01T00:00:00Z",
    ]
    job_page = client.get("/jobs/j1/").text
    assert re.search(rf"<dt>ingested</dt><dd>{ISO_UTC}</dd>", job_page), job_page[:3000]
    trend = client.get("/trend?metric=val_loss&variant=ref").text
    assert "2026-10-01T00:00:00Z</td>" in trend and "+00:00</td>" not in trend
    out = tmp_path / "report"
    study("report", "--out", str(out))
    index = (out / "index.html").read_text()
    assert re.findall(r'<td class="time">([^<]*)</td>', index)[0] == "2026-11-01T00:00:00Z"
    assert re.search(rf"generated {ISO_UTC} by tracker", index)
    assert re.search(rf"<dt>ingested</dt><dd>{ISO_UTC}</dd>", (out / "j1/index.html").read_text())


def test_the_home_pages_comparison_is_tracker_compares(study: Cli, db_url: str) -> None:
    """The home page compares the two latest jobs from their kept verdicts, `tracker compare`
    from their points: the same table (a flag check, divergence, judged by its status in both,
    not its kept 1.0 / 0.0 against a yardstick), the same regressions."""
    exp = load_expectations()
    engine = open_database(db_url)
    with Session(engine) as session:
        ids = selected_jobs(session, JobSelection()).get_column("job_id").to_list()
        a, b = (session.get_one(Job, job_id).name for job_id in ids[-2:])
        cli = compare_jobs(session, a, b, exp)
        kept = latest_verdicts(session, ids, exp)
        study = session.get_one(Job, ids[-1]).study
        home = compare_in_study(
            session,
            exp,
            (a, kept[0]),
            (b, kept[1]),
            study,
            lambda gate: kept_verdicts(session, gate, study),
        )
    engine.dispose()
    assert (a, b) == ("j2", "j3") and cli.regressions
    assert "diverged" in cli.table.get_column("check").to_list()
    assert home.table.equals(cli.table)
    assert (home.regressions, home.within_noise) == (cli.regressions, cli.within_noise)


def test_the_claims_and_comparison_after_the_home_page_are_those_it_worked_out(
    study: Cli, db_url: str
) -> None:
    """The home page judges every claim and reads every job's kept verdicts for its latest
    comparison; the claims page and a comparison then use what it kept of the same jobs (no
    verdict read again), the same bytes as a server that works them out for itself."""
    pages = ("/claims", "/api/compare?a=j1&b=j3")
    with client_for(db_url) as fresh:
        alone = [fresh.get(page).text for page in pages]
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    with client_for(db_url) as client:
        assert client.get("/").status_code == 200
        event.listen(Engine, "before_cursor_execute", count)
        try:
            after = [client.get(page).text for page in pages]
        finally:
            event.remove(Engine, "before_cursor_execute", count)
    assert after == alone
    assert statements and not any("job_verdict" in statement for statement in statements)


def between(html: str, start: str, end: str) -> str:
    at = html.index(start)
    return html[at : html.index(end, at)]


def test_the_figures_across_jobs_draw_the_latest_jobs_and_every_job_is_judged(
    study: Cli, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``FIGURE_JOBS`` jobs the figures across jobs and their table draw the latest ones
    alone, and say so; the jobs table, the claims and the latest comparison still cover every
    job, as when every job is drawn."""
    with client_for(db_url) as client:
        every = client.get("/").text
    monkeypatch.setattr(across_jobs, "FIGURE_JOBS", 2)
    with client_for(db_url) as client:
        latest = client.get("/").text
    section = between(latest, 'id="cross-job"', 'id="compare"')
    assert (
        "The latest 2 of the 3 jobs in job order (time metadata, else ingest time), from j2 to"
        ' j3: the figures and their table draw these alone (<a href="/trend">trend</a> draws a'
        " metric across every job), the claims and the comparison judge every job." in section
    )
    drawn = [trace for figure in figures(section) for trace in figure["data"]]
    named = {trace.get("name") for trace in drawn} | {
        name for trace in drawn if isinstance(trace.get("text"), list) for name in trace["text"]
    }
    assert {"j2", "j3"} <= named and "j1" not in named
    assert "of 2</td>" in section and "of 3</td>" not in section  # jobs off the analytic
    for start, end in (('id="jobs"', "</section>"), ('id="claims"', "</section>")):
        assert between(latest, start, end) == between(every, start, end)
    assert between(latest, 'id="compare"', "</section>") == between(
        every, 'id="compare"', "</section>"
    )
    out = tmp_path / "report"
    study("report", "--out", str(out))
    index = (out / "index.html").read_text()
    assert "The latest 2 of the 3 jobs" in index and "every job), the claims" not in index
    assert "from j2 to j3: the figures and their table draw these alone, the claims" in index
