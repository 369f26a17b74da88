"""``tracker serve`` through FastAPI's TestClient: every route, every error, every security
rule, on SQLite and PostgreSQL. The JSON twins must equal the CLI's ``--format json``."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tracker.errors import DatabaseUnavailable, UnsafeHost
from tracker.queries.compare import CHANGES
from tracker.sample import write_sample_job
from tracker.server import create_app, schemas
from tracker.server.security import CONTENT_SECURITY_POLICY, SECURITY_HEADERS, check_host
from tracker.store import codec
from tracker.store.run_rows import seal_runs

STEPS = 3000
EVIL = "<img src=x onerror=alert(1)>"  # HTML, and no slash: a job page's path holds it
TOKEN = "s3cret-token"


def cli_json(cli: Cli, *args: str) -> Any:
    return json.loads(cli(*args, "--format", "json").stdout)


API_CASES = [
    ("/api/jobs", ("jobs",)),
    ("/api/trend?metric=bpp_state&model=gpt-124m", ("query", "trend", "--metric", "bpp_state",
                                                    "--model", "gpt-124m")),
    ("/api/trend?metric=val_loss&where=gpu=A10G&group_by=flashoptim",
     ("query", "trend", "--metric", "val_loss", "--where", "gpu=A10G", "--group-by", "flashoptim")),
    ("/api/claims", ("claims",)),
    ("/api/claims?group_by=gpu", ("claims", "--group-by", "gpu")),
    ("/api/claims?job=j1&job=j2", ("claims", "--job", "j1", "--job", "j2")),
]  # fmt: skip


@pytest.mark.parametrize(("path", "args"), API_CASES, ids=[c[0] for c in API_CASES])
def test_api_equals_the_cli_json(client: TestClient, study: Cli, path: str, args: Any) -> None:
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == cli_json(study, *args)


def test_api_compare_equals_the_cli(
    client: TestClient, study: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # the regressions unwrapped, one a line
    body = client.get("/api/compare?a=j1&b=j3").json()
    assert body["table"] == cli_json(study, "compare", "j1", "j3")
    lines = study("compare", "j1", "j3").stdout.splitlines()
    assert [f"  {line}" for line in body["regressions"]] == [
        line for line in lines if line.startswith("  ")
    ]
    assert any(line.startswith("bpp_state gpt-124m/flash") for line in body["regressions"])


def test_compare_page_puts_the_regressions_first_under_a_red_banner(
    client: TestClient, study: Cli
) -> None:
    changed = cli_json(study, "compare", "j1", "j3", "--changes-only")
    assert changed and all(row["change"] != "same" for row in changed)
    assert client.get("/api/compare?a=j1&b=j3&changes_only=true").json()["table"] == changed
    regressed = [f"{r['check']} {r['subject']}" for r in changed if r["change"] == "regressed"]
    page = client.get("/compare?a=j1&b=j3").text
    banner = page[page.index('<div class="regressions" role="alert">') :]
    banner = banner[: banner.index("</div>")]
    assert f"<strong>{len(regressed)} regressions</strong>" in banner
    assert all(f"<li>{name}: " in banner for name in regressed)
    assert "No regression" not in page
    kinds = re.findall(r'<tr class="(\w+)"><td><span class="badge', page)
    ranks = [CHANGES.index(kind) for kind in kinds]
    assert kinds[0] == "regressed" and ranks == sorted(ranks) and kinds[-1] == "same"
    only = client.get("/compare?a=j1&b=j3&changes_only=true").text
    assert '<tr class="same">' not in only and 'id="compare-all"' in only
    assert re.findall(r'<tr class="(\w+)"><td><span class="badge', only) == kinds[: len(changed)]
    bad = client.get("/api/compare?a=j1&b=j3&baseline_where=gpu")
    assert (bad.status_code, bad.json()["detail"]) == (
        422,
        "baseline_where: expected KEY=VALUE or KEY OP VALUE (OP one of = != < <= > >=), got 'gpu'",
    )
    judged = client.get("/api/compare?a=j1&b=j3&baseline_where=gpu=L4").json()["table"]
    assert judged == cli_json(study, "compare", "j1", "j3", "--baseline-where", "gpu=L4")


def test_api_job_holds_show_and_verdicts(client: TestClient, study: Cli) -> None:
    body = client.get("/api/jobs/j3").json()
    shown = cli_json(study, "show", "j3")
    assert body["probes"] == shown["probes"]
    assert body["arms"] == shown["arms"]
    assert body["meta"] == {"time": "2026-11-01T00:00:00Z", "gpu": "A10G", "flashoptim": "0.1.1"}
    assert {c["arm"] for c in body["curves"]} == {a["arm"] for a in shown["arms"]}
    statuses = {(v["check"], v["subject"]): v["status"] for v in body["verdicts"]}
    assert statuses[("bpp_state", "gpt-124m/flash")] == "FAIL"
    assert statuses[("bpp_state", "gpt-124m/ref")] == "PASS"


def raw_points(cli: Cli, job: str, arm: str) -> list[dict[str, Any]]:
    return cli_json(cli, "query", "curve", "--job", job, "--arm", arm)


def test_curve_window_holds_every_raw_point(client: TestClient, study: Cli) -> None:
    body = client.get("/api/curve?job=j1&arm=ref_s0&start=1000&end=1999&points=2000").json()
    expected = [p for p in raw_points(study, "j1", "ref_s0") if 1000 <= p["step"] <= 1999]
    assert body["raw"] is True
    assert body["in_window"] == len(expected) == 1000
    assert body["step"] == [p["step"] for p in expected]
    assert body["value"] == [p["value"] for p in expected]
    assert (body["first_step"], body["last_step"], body["total"]) == (0, STEPS - 1, STEPS)


def test_whole_curve_is_downsampled_keeping_its_extremes(client: TestClient, study: Cli) -> None:
    points = raw_points(study, "j1", "linear_s0")  # diverges: NaN / inf values too
    for _ in range(2):  # the second answer comes from the cache and must be the same
        body = client.get("/api/curve?job=j1&arm=linear_s0&points=100").json()
        assert body["raw"] is False and body["in_window"] == STEPS
        assert len(body["step"]) <= 100
        finite = np.array([p["value"] for p in points if isinstance(p["value"], float)])
        by_step = dict(zip(body["step"], body["value"], strict=True))
        drawn = [v for v in by_step.values() if isinstance(v, float)]
        assert min(drawn) == finite.min() and max(drawn) == finite.max()
        assert body["step"][0] == 0 and body["step"][-1] == STEPS - 1
        raw = {p["step"]: p["value"] for p in points}
        assert all(raw[step] == value for step, value in by_step.items())
        gaps = [p for p in points if not isinstance(p["value"], float)]
        if gaps:  # the first gap survives downsampling, as --format json writes it
            assert raw[gaps[0]["step"]] in (None, "Infinity", "-Infinity")
            assert any(not isinstance(v, float) for v in by_step.values())


PAGES = [
    ("/", ["j1", "j2", "j3", "Claims"]),
    ("/jobs/j3", ["Verdicts", "bpp_state", 'class="badge fail"', "/curve?job=j3&amp;arm=ref_s0"]),
    ("/jobs/j3/index.html", ["Verdicts", 'href="mem_scaling.html"', 'href="verdicts.json"']),
    ("/jobs/j3/gpt_trajectories.html", ["j3: Training trajectories", 'data-figure="gpt_traj']),
    ("/compare?a=j1&b=j3", ["regression", "bpp_state", 'class="badge regressed"']),
    ("/trend?metric=bpp_state&model=gpt-124m", ["bpp_state across jobs", "j2"]),
    ("/trend", ["val_loss across jobs"]),
    ("/curve?job=j1&arm=ref_s0", ['id="explorer"', 'data-job="j1"', "3,000 points"]),
    ("/claims", ["REPRODUCED", '<td class="mono claim">bpp_params</td>']),  # one line a claim
    ("/claims?where=gpu=A10G&group_by=flashoptim", ["0.1.0", "0.1.1"]),
]


@pytest.mark.parametrize(("path", "texts"), PAGES, ids=[p[0] for p in PAGES])
def test_pages(client: TestClient, path: str, texts: list[str]) -> None:
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    for expected in texts:
        assert expected in response.text, expected
    assert "<script>" not in response.text  # scripts only from files, never inline


def test_job_files_are_the_reports(client: TestClient, study: Cli) -> None:
    verdicts = client.get("/jobs/j3/verdicts.json")
    assert verdicts.headers["content-type"] == "application/json"
    assert verdicts.json() == client.get("/api/jobs/j3").json()["verdicts"]
    memory = client.get("/jobs/j3/mem_analysis.json").json()
    assert isinstance(memory, dict) and memory
    redirect = client.get("/jobs/j3", follow_redirects=False)
    assert redirect.status_code in (307, 308) and redirect.headers["location"].endswith("/jobs/j3/")


def test_the_same_verdicts_give_the_same_json_on_every_route(
    cli: Cli, db_url: str, tmp_path: Path
) -> None:
    """Non-finite measured values: /api/jobs/NAME, the server's verdicts.json and the report's
    verdicts.json write them alike (null, as the study's files do)."""
    job = write_sample_job(tmp_path / "odd", steps=200)
    for arm, value in (("flash_s0", "NaN"), ("ref_s1", "Infinity"), ("ref_s0", "-Infinity")):
        summary = tmp_path / "odd" / f"{arm}.json"
        summary.write_text(
            summary.read_text().replace('"val_loss": ', f'"val_loss": {value}, "_": ')
        )
    cli("ingest", str(job))
    cli("report", "--out", str(tmp_path / "report"))
    written = json.loads((tmp_path / "report" / "odd" / "verdicts.json").read_text())
    with client_for(db_url) as client:
        served = client.get("/jobs/odd/verdicts.json")
        api = client.get("/api/jobs/odd").json()["verdicts"]
    assert served.content.decode() == (tmp_path / "report" / "odd" / "verdicts.json").read_text()
    assert api == served.json() == written
    measured = {v["subject"]: v["measured"] for v in api if v["check"] == "val_loss_paper"}
    assert measured == {"flash_s0": None, "ref_s1": None, "ref_s0": None}


def test_job_list_is_newest_first(client: TestClient) -> None:
    html = client.get("/").text
    table = html[html.index('id="jobs"') :]
    assert table.index(">j3<") < table.index(">j2<") < table.index(">j1<")


def test_assets_come_from_the_server(client: TestClient) -> None:
    import plotly

    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    response = client.get("/static/plotly.min.js")
    assert response.status_code == 200
    assert response.content == plotly_js.read_bytes()
    assert response.headers["content-type"].startswith("text/javascript")
    for name in (
        "render.js",
        "explorer.js",
        "plot.js",
        "runs.js",
        "forms.js",
        "tables.js",
        "docs.js",
    ):
        assert client.get(f"/static/{name}").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/server.css").headers["content-type"].startswith("text/css")
    assert "/api/curve" in client.get("/openapi.json").json()["paths"]


SWAGGER_UI_FILES = [
    ("swagger-ui-bundle.js", "text/javascript"),
    ("swagger-ui.css", "text/css"),
    ("favicon-32x32.png", "image/png"),
]


class Resources(HTMLParser):
    """The scripts and linked files of a page, and the text of any inline script."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        self._in_script = tag == "script"
        url = named.get("src") or named.get("href")
        if tag in ("script", "link") and url:
            self.urls.append(url)

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(data)


def test_docs_page_runs_swagger_ui_from_the_server(client: TestClient) -> None:
    response = client.get("/docs")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    resources = Resources()
    resources.feed(response.text)
    assert resources.inline == []
    assert "/static/swagger-ui/swagger-ui-bundle.js" in resources.urls
    assert "/static/docs.js" in resources.urls
    for url in resources.urls:  # same origin: a path, never a scheme or a host
        assert url.startswith("/") and not url.startswith("//"), url
        assert client.get(url).status_code == 200, url
    assert 'id="swagger-ui"' in response.text


@pytest.mark.parametrize(("name", "media_type"), SWAGGER_UI_FILES)
def test_swagger_ui_comes_from_the_server(client: TestClient, name: str, media_type: str) -> None:
    from swagger_ui_bundle import swagger_ui_path

    response = client.get(f"/static/swagger-ui/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(media_type)
    assert response.content == (Path(swagger_ui_path) / name).read_bytes()


ERRORS = [
    ("/jobs/nope", 404, "Error: no job named 'nope'"),
    ("/jobs/nope/verdicts.json", 404, "Error: no job named 'nope'"),
    ("/jobs/j1/secrets.txt", 404, "Error: job 'j1' has no file 'secrets.txt'"),
    ("/api/jobs/nope", 404, "no job named 'nope'"),
    ("/compare?a=j1&b=nope", 404, "Error: no job named 'nope'"),
    ("/api/compare?a=j1", 422, "bad parameter 'b': Field required"),
    ("/api/trend?metric=nope", 422, "unknown metric 'nope'; choose one of: n_params"),
    ("/api/trend", 422, "bad parameter 'metric': Field required"),
    ("/trend?metric=nope", 422, "Error: unknown metric 'nope'"),
    ("/api/trend?metric=val_loss&job=nope", 404, "no job named 'nope'"),
    (
        "/api/claims?where=gpu",
        422,
        "where: expected KEY=VALUE or KEY OP VALUE (OP one of = != < <= > >=), got 'gpu'",
    ),
    ("/claims?group_by=job", 422, "Error: cannot group by metadata 'job'"),
    ("/api/curve?job=j1&arm=nope", 404, "job 'j1' has no arm 'nope'; its arms: flash_s0, "),
    (
        "/curve?job=j1&arm=ref_s1x",
        404,
        "Error: job 'j1' has no arm 'ref_s1x'; its arms: flash_s0, ",
    ),
    ("/curve?job=nope&arm=ref_s0", 404, "Error: no job named 'nope'; known jobs: "),
    (
        "/curve?job=j1&arm=ref_s0&metric=los",
        404,
        "Error: job 'j1' has no curve 'los' for arm 'ref_s0'; its metrics: loss, lr, step_ms; "
        "did you mean loss?",
    ),
    ("/api/curve?job=j1&arm=ref_s0&points=5", 422, "bad parameter 'points': Input should be"),
    ("/api/curve?job=j1&arm=ref_s0&start=x", 422, "bad parameter 'start': Input should be"),
    ("/api/curve?job=j1&arm=ref_s0&start=9&end=3", 422, "start must not exceed end"),
    ("/api/curve?arm=ref_s0", 422, "bad parameter 'job': Field required"),
    ("/static/app.py", 404, "Error: no static file 'app.py'"),
    ("/static/../server/app.py", 404, "Error: Not Found"),
    ("/static/swagger-ui/oauth2-redirect.html", 404, "Error: no Swagger UI file 'oauth2-redi"),
    ("/nowhere", 404, "Error: Not Found"),
]


@pytest.mark.parametrize(("path", "status", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_one_line(client: TestClient, path: str, status: int, message: str) -> None:
    response = client.get(path)
    assert response.status_code == status
    if path.startswith("/api/"):
        detail = response.json()["detail"]
        assert detail.startswith(message) and "\n" not in detail
    else:
        assert response.headers["content-type"].startswith("text/plain")
        assert response.text.startswith(message) and response.text.count("\n") == 1
    assert "Traceback" not in response.text


def test_an_unexpected_failure_is_one_line_too(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_session: Any) -> None:
        raise RuntimeError("boom\nwith a second line")

    monkeypatch.setattr("tracker.store.catalog.list_jobs", broken)
    response = client.get("/api/jobs")
    assert response.status_code == 500
    assert response.json() == {"detail": "internal error (the server's log has the details)"}
    for name, value in SECURITY_HEADERS.items():  # answered outside the middleware
        assert response.headers[name] == value


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
@pytest.mark.parametrize("path", ["/api/jobs", "/jobs/j1", "/login", "/nowhere"])
def test_only_get_and_head(client: TestClient, method: str, path: str) -> None:
    response = client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
    line = f"method {method} is not allowed: this server only reads (GET, HEAD)"
    if path.startswith("/api/"):  # as every error of the API: JSON
        assert response.json() == {"detail": line}
    else:
        assert response.text == f"Error: {line}\n"


def test_head_answers_like_get_without_a_body(client: TestClient) -> None:
    get, head = client.get("/api/jobs"), client.head("/api/jobs")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(get.content))
    assert client.head("/jobs/nope").status_code == 404


@pytest.mark.parametrize("path", ["/", "/api/jobs", "/jobs/nope", "/static/plotly.min.js", "/docs"])
def test_security_headers_on_every_response(client: TestClient, path: str) -> None:
    response = client.get(path)
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value
    policy = response.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "unsafe-inline'; img" in policy
    assert "frame-ancestors 'none'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_database_is_opened_read_only(client: TestClient) -> None:
    engine = client.app.state.served.engine  # type: ignore[attr-defined]
    with Session(engine) as session, pytest.raises(Exception) as refused:
        session.execute(text("DELETE FROM job_meta"))
        session.commit()
    assert any(
        reason in str(refused.value)
        for reason in ("not authorized", "read-only transaction", "readonly database")
    )
    with Session(engine) as session:
        assert session.execute(text("SELECT count(*) FROM job_meta")).scalar() == 8


def test_a_request_reads_one_snapshot(client: TestClient, study: Cli) -> None:
    """A cache key and the result cached under it come from the same state of the database:
    a write committed while a request's session is open is not seen by that session."""
    count = text("SELECT count(*) FROM job_meta")
    with Session(client.app.state.served.engine) as session:  # type: ignore[attr-defined]
        assert session.execute(count).scalar() == 8
        study("meta", "j2", "note=written meanwhile")
        assert session.execute(count).scalar() == 8
    with Session(client.app.state.served.engine) as session:  # type: ignore[attr-defined]
        assert session.execute(count).scalar() == 9


def test_new_and_replaced_jobs_show_without_restart(
    client: TestClient, study: Cli, tmp_path: Path
) -> None:
    assert client.get("/api/jobs/j3").json()["verdicts"]  # analysed and cached
    assert ">j4<" not in client.get("/").text  # (a figure's base64 data may hold "j4")
    study("ingest", str(write_sample_job(tmp_path / "j4", steps=50)))
    assert [row["job"] for row in client.get("/api/jobs").json()][-1] == "j4"
    assert ">j4<" in client.get("/").text
    regressed = {v["check"]: v["status"] for v in client.get("/api/jobs/j3").json()["verdicts"]
                 if v["subject"] == "gpt-124m/flash"}  # fmt: skip
    assert regressed["bpp_state"] == "FAIL"
    fixed = write_sample_job(tmp_path / "fixed", seed=2, steps=STEPS)
    study("ingest", str(fixed), "--job", "j3", "--replace")
    fixed_now = {v["check"]: v["status"] for v in client.get("/api/jobs/j3").json()["verdicts"]
                 if v["subject"] == "gpt-124m/flash"}  # fmt: skip
    assert fixed_now["bpp_state"] == "PASS"
    regressions = client.get("/api/compare?a=j1&b=j3").json()["regressions"]
    assert not any(line.startswith("bpp_state gpt-124m/flash") for line in regressions)


FRESH_ROUTES = [
    "/api/jobs", "/api/jobs/j1", "/api/claims?group_by=gpu", "/api/claims?where=gpu=A10G",
    "/api/compare?a=j1&b=j3", "/api/trend?metric=val_loss&group_by=gpu", "/", "/jobs/j1/",
    "/jobs/j2/", "/claims?group_by=gpu", "/compare?a=j1&b=j3", "/trend?group_by=gpu",
]  # fmt: skip


def test_metadata_shows_on_the_next_request_of_every_route(
    client: TestClient, study: Cli, db_url: str, tmp_path: Path
) -> None:
    """One server, every route cached, then a write: ``tracker meta`` and a re-ingest of the
    same content with new ``--meta``. The next request of every route equals a new server's."""

    def answers(on: TestClient) -> dict[str, str]:
        responses = {path: on.get(path) for path in FRESH_ROUTES}
        assert all(r.status_code == 200 for r in responses.values()), responses
        return {path: response.text for path, response in responses.items()}

    def gpus(path: str) -> set[str]:
        return {row["group"] for row in client.get(path).json()}

    before = answers(client)
    assert answers(client) == before  # the second time, from the caches
    assert gpus("/api/claims?group_by=gpu") == {"A10G", "L4"}
    study("meta", "j1", "gpu=H100", "time=2026-10-20T00:00:00Z")  # j1 now follows j2
    after_meta = answers(client)
    with client_for(db_url) as fresh:
        assert after_meta == answers(fresh)
    assert all(after_meta[path] != before[path] for path in FRESH_ROUTES if "compare" not in path)
    jobs = client.get("/api/jobs").json()
    assert [row["job"] for row in jobs] == ["j2", "j1", "j3"]
    assert jobs[1]["meta"]["gpu"] == "H100"
    assert client.get("/api/jobs/j1").json()["meta"]["gpu"] == "H100"
    assert gpus("/api/claims?group_by=gpu") == {"A10G", "H100", "L4"}
    assert "H100" in after_meta["/"] and "H100" in after_meta["/jobs/j1/"]
    assert (
        "H100" in after_meta["/claims?group_by=gpu"] and "H100" in after_meta["/trend?group_by=gpu"]
    )

    same = write_sample_job(tmp_path / "again", steps=STEPS, seed=0)  # j1's content
    result = study("ingest", str(same), "--job", "j1", "--meta=gpu=B200")
    assert "metadata updated" in result.output
    after_ingest = answers(client)
    with client_for(db_url) as fresh:
        assert after_ingest == answers(fresh)
    assert client.get("/api/jobs/j1").json()["meta"]["gpu"] == "B200"
    assert client.get("/api/jobs").json()[1]["meta"]["gpu"] == "B200"
    assert gpus("/api/claims?group_by=gpu") == {"A10G", "B200", "L4"}
    gone = client.get("/api/claims?where=gpu=H100")  # no job has it any more: 422, not []
    assert (gone.status_code, gone.json()["detail"]) == (
        422,
        "no job has gpu=H100; known values: A10G, B200, L4",
    )
    for page in ("/", "/jobs/j1/", "/claims?group_by=gpu", "/trend?group_by=gpu"):
        assert "B200" in after_ingest[page] and "H100" not in after_ingest[page], page


SCHEMAS: dict[str, tuple[str, Any, str]] = {
    "/api/jobs": ("/api/jobs", list[schemas.JobRow], "JobRow"),
    "/api/jobs/{name}": ("/api/jobs/j2", schemas.JobDetail, "JobDetail"),
    "/api/claims": ("/api/claims?group_by=gpu", list[schemas.ClaimRow], "ClaimRow"),
    "/api/compare": ("/api/compare?a=j1&b=j3", schemas.Comparison, "Comparison"),
    "/api/trend": ("/api/trend?metric=val_loss&group_by=gpu", list[schemas.TrendRow], "TrendRow"),
    "/api/curve": ("/api/curve?job=j2&arm=ref_s0", schemas.CurveWindow, "CurveWindow"),
    "/api/runs": ("/api/runs?sort=-val_loss&limit=5", schemas.RunsTable, "RunsTable"),
    "/api/probes": ("/api/probes?group_by=gpu", list[schemas.ProbeTableRow], "ProbeTableRow"),
    "/api/plot": (
        "/api/plot?run=j2/ref_s0&run=j1/flash_s0&smooth=0.5&group=gpu",
        schemas.Plot,
        "Plot",
    ),
}


def test_openapi_has_a_response_schema_for_every_api_route(client: TestClient) -> None:
    """Each /api route documents what it returns, and its answers fit that schema."""
    document = client.get("/openapi.json").json()
    assert {path for path in document["paths"] if path.startswith("/api/")} == set(SCHEMAS)
    for route, (example, model, name) in SCHEMAS.items():
        ok = document["paths"][route]["get"]["responses"]["200"]["content"]["application/json"]
        assert name in json.dumps(ok["schema"]), route
        assert name in document["components"]["schemas"]
        TypeAdapter(model).validate_python(client.get(example).json())


def test_job_names_holding_html_stay_inert(study: Cli, db_url: str, engine: Engine) -> None:
    with engine.begin() as connection:  # ingest refuses such names; another tool may not
        connection.execute(text("UPDATE job SET name = :evil WHERE name = 'j2'"), {"evil": EVIL})
        # ...and must then reseed its chunks' checksums (seeded with the job's name)
        chunks = connection.execute(
            text(
                "SELECT c.curve_id, c.first_step, c.data, r.arm, cu.metric FROM curve_chunk c"
                " JOIN curve cu ON cu.id = c.curve_id JOIN run r ON r.id = cu.run_id"
                " JOIN job j ON j.id = r.job_id WHERE j.name = :evil"
            ),
            {"evil": EVIL},
        ).all()
        for curve_id, first_step, data, arm, metric in chunks:
            checksum = codec.checksum(bytes(data), codec.curve_seed(curve_id, EVIL, arm, metric))
            connection.execute(
                text(
                    "UPDATE curve_chunk SET checksum = :checksum"
                    " WHERE curve_id = :curve AND first_step = :first"
                ),
                {
                    "checksum": checksum,
                    "curve": curve_id,
                    "first": first_step,
                },
            )
        # ...and its runs' checksums (seeded with it too)
        with Session(bind=connection) as session:
            job_id = connection.scalar(
                text("SELECT id FROM job WHERE name = :evil"), {"evil": EVIL}
            )
            seal_runs(session, [job_id])
    study("db", "rederive", "--force")  # ...and its kept summary (sealed for its name)
    with client_for(db_url) as client:
        index = client.get("/").text
        escaped = "&lt;img src=x onerror=alert(1)&gt;"
        assert EVIL not in index and escaped in index
        page = client.get(f"/jobs/{quote(EVIL, safe='')}/")
        assert page.status_code == 200
        assert EVIL not in page.text and escaped in page.text
        assert client.get("/api/jobs").json()[1]["job"] == EVIL
        compare = client.get("/compare", params={"a": EVIL, "b": "j3"}).text
        assert EVIL not in compare
        missing = client.get(f"/jobs/{quote(EVIL + 'x', safe='')}/")
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("text/plain")


def test_token_guards_every_route(study: Cli, db_url: str) -> None:
    with client_for(db_url, TOKEN) as client:
        guarded = (
            "/",
            "/api/jobs",
            "/static/plotly.min.js",
            "/openapi.json",
            "/curve",
            "/docs",
            "/static/swagger-ui/swagger-ui-bundle.js",
        )
        for path in guarded:
            response = client.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"] == "Bearer"
            assert "Traceback" not in response.text
        wrong = client.get("/api/jobs", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert wrong.json()["detail"].startswith("a token is required")
        right = client.get("/api/jobs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200 and len(right.json()) == 3
        assert client.get("/login?token=nope").status_code == 401
        assert "tracker_token" not in client.cookies
        login = client.get(f"/login?token={TOKEN}", follow_redirects=False)
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert client.get("/").status_code == 200  # the cookie now
        assert client.get("/static/explorer.js").status_code == 200
        assert client.get("/docs").status_code == 200


def test_tokens_are_compared_in_constant_time(
    study: Cli, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hmac

    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr("tracker.server.security.hmac.compare_digest", spy)
    with client_for(db_url, TOKEN) as client:
        client.get("/api/jobs", headers={"Authorization": "Bearer guess"})
    assert compared == [(b"guess", TOKEN.encode())]


@pytest.mark.parametrize(
    ("host", "served"),
    [
        ("127.0.0.1:8765", True),
        ("localhost", True),
        ("[::1]:8765", True),
        ("attacker.example:8765", False),
        ("127.0.0.1.attacker.example", False),
    ],
)
def test_without_a_token_only_loopback_names_are_served(
    client: TestClient, host: str, served: bool
) -> None:
    response = client.get("/api/jobs", headers={"Host": host})
    if served:
        assert response.status_code == 200
    else:
        assert response.status_code == 400
        detail = response.json()["detail"]
        assert detail.startswith(f"host {host!r} is not served without a token")
        assert response.headers["x-content-type-options"] == "nosniff"


def test_with_a_token_any_host_name_is_served(study: Cli, db_url: str) -> None:
    with client_for(db_url, TOKEN) as client:
        headers = {"Host": "tracker.example.org", "Authorization": f"Bearer {TOKEN}"}
        assert client.get("/api/jobs", headers=headers).status_code == 200


def test_without_a_token_login_just_redirects(client: TestClient) -> None:
    response = client.get("/login?token=anything", follow_redirects=False)
    assert response.status_code == 303 and "set-cookie" not in response.headers


@pytest.mark.parametrize(
    ("host", "token", "refused"),
    [
        ("127.0.0.1", None, False),
        ("localhost", None, False),
        ("::1", None, False),
        ("0.0.0.0", None, True),
        ("192.168.1.7", None, True),
        ("tracker.example.org", None, True),
        ("0.0.0.0", TOKEN, False),
    ],
)
def test_off_loopback_a_token_is_required(host: str, token: str | None, refused: bool) -> None:
    if refused:
        with pytest.raises(UnsafeHost):
            check_host(host, token)
    else:
        check_host(host, token)


def test_serve_refuses_a_public_host_without_a_token(study: Cli) -> None:
    result = study("serve", "--host", "0.0.0.0", ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: refusing to serve on 0.0.0.0 without a token: anyone who can reach it could "
        "read the study; give --token (or TRACKER_SERVE_TOKEN), or serve on 127.0.0.1\n"
    )


def test_an_empty_or_missing_database_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DatabaseUnavailable):
        create_app(f"sqlite:///{tmp_path / 'missing.db'}")
    assert not (tmp_path / "missing.db").exists()  # opened read-only: never created


def test_serve_neither_creates_nor_migrates_a_database(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        missing = db_url.replace("tracker.db", "missing.db")
        result = Cli(missing)("serve", ok=False)
        assert result.exit_code == 1
        path = missing.removeprefix("sqlite:///")
        assert result.stderr == (
            f"Error: no database file {path}; only `tracker ingest`, `tracker demo` and "
            "`tracker db upgrade` create one\n"
        )
        assert not Path(missing.removeprefix("sqlite:///")).exists()
    else:
        result = Cli(db_url)("serve", ok=False)  # an empty schema: nothing to serve yet
        assert result.exit_code == 1
        assert "schema revision none (empty database)" in result.stderr
        assert result.stderr.count("\n") == 1


BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [
        ("GET", "/jobs/j1", {"Host": "evil.com"}),  # else a 307 to http://evil.com/jobs/j1/
        ("GET", "/nowhere", {}),
        ("GET", "/static/nothing.js", {}),
        ("GET", "/static/swagger-ui/oauth2-redirect.html", {}),
        ("GET", "/api/curve", {}),  # parameters missing: checked after the token
        ("POST", "/api/jobs", {}),
        ("DELETE", "/", {"Host": "localhost:1@evil"}),
        ("HEAD", "/jobs/j1/", {}),
    ],
)
def test_with_a_token_nothing_answers_before_the_token_check(
    study: Cli, db_url: str, method: str, path: str, headers: dict[str, str]
) -> None:
    with client_for(db_url, TOKEN) as client:
        response = client.request(method, path, headers=headers, follow_redirects=False)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "location" not in response.headers
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value
    if method == "HEAD":
        assert response.content == b""
    elif path.startswith("/api/"):
        assert response.json() == {
            "detail": "a token is required: send 'Authorization: Bearer TOKEN' or open "
            "/login?token=TOKEN"
        }
    else:
        assert response.text == (
            "Error: a token is required: send 'Authorization: Bearer TOKEN' or open "
            "/login?token=TOKEN\n"
        )


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer  {TOKEN}", f"Bearer {TOKEN} ", f"Bearer {TOKEN}\t", f"Bearer {TOKEN[:-1]}", "Bearer"],
)
def test_the_token_is_compared_exactly(study: Cli, db_url: str, authorization: str) -> None:
    with client_for(db_url, TOKEN) as client:
        assert client.get("/api/jobs", headers={"Authorization": authorization}).status_code == 401
        assert client.get("/login", params={"token": f" {TOKEN}"}).status_code == 401
        assert client.get("/login", params={"token": f"{TOKEN} "}).status_code == 401
        assert client.get("/api/jobs", headers=BEARER).status_code == 200


def test_with_the_token_a_redirect_and_a_404_answer_as_usual(study: Cli, db_url: str) -> None:
    with client_for(db_url, TOKEN) as client:
        redirect = client.get("/jobs/j1", headers=BEARER, follow_redirects=False)
        assert redirect.status_code == 307
        assert redirect.headers["location"] == "http://127.0.0.1:8765/jobs/j1/"
        missing = client.get("/nowhere", headers=BEARER)
        assert missing.status_code == 404 and missing.text == "Error: Not Found\n"
        assert missing.headers["x-frame-options"] == "DENY"


MALFORMED_HOSTS = [
    "localhost:1@evil",
    "[::1]evil.com",
    "localhost:99999",
    "localhost:0",
    "localhost:",
    "localhost:80:80",
    "[::1",
    "[zz::1]:80",
    "local host",
    "127.0.0.1/evil",
]


@pytest.mark.parametrize("host", MALFORMED_HOSTS)
def test_a_malformed_host_header_is_refused(client: TestClient, host: str) -> None:
    response = client.get("/api/jobs", headers={"Host": host})
    assert response.status_code == 400
    assert response.json() == {"detail": f"malformed Host header {host!r}"}
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


@pytest.mark.parametrize("host", MALFORMED_HOSTS[:3])
def test_a_malformed_host_header_is_refused_with_a_token_too(
    study: Cli, db_url: str, host: str
) -> None:
    with client_for(db_url, TOKEN) as client:
        response = client.get("/jobs/j1/", headers={**BEARER, "Host": host})
    assert response.status_code == 400
    assert response.text == f"Error: malformed Host header {host!r}\n"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/nowhere", 404), ("GET", "/api/jobs/nope", 404), ("POST", "/", 405)],
)
def test_security_headers_on_the_servers_own_errors(
    client: TestClient, method: str, path: str, status: int
) -> None:
    response = client.request(method, path)
    assert response.status_code == status
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value
