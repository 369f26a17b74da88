"""The runs table (``/runs``, ``/api/runs``, ``/api/runs.csv``), ``/api/probes``, metadata as
an object in every JSON listing of jobs, and ``serve`` on a port in use; both backends."""

from __future__ import annotations

import csv
import io
import json
import math
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from tests.conftest import Cli
from tracker import api

WHERE_KEYS = (  # what a --where key may name besides metadata
    "run columns: seed, val_loss, final_loss, diverged, steps, last_step, min_loss, last_loss, "
    "nonfinite, notes"
)

STEPS = 300
EVIL = "<script>alert(1)</script>&"
JOBS = {
    "j1": ({"seed": 0}, ["time=2026-10-01T00:00:00Z", "gpu=A10G", f"note={EVIL}"]),
    "j2": ({"seed": 1}, ["time=2026-10-15T00:00:00Z", "gpu=L4"]),
    "j3": ({"seed": 2, "flash_state_shift": 0.5}, ["time=2026-11-01T00:00:00Z", "gpu=A10G"]),
}
ARMS = 4  # of every sample job
BASE = [
    "job",
    "time",
    "arm",
    "model",
    "variant",
    "seed",
    "steps",
    "last_step",
    "stopped",
    "final_loss",
]
BASE += ["min_loss", "last_loss", "nonfinite", "val_loss", "diverged", "notes"]
BASE += ["PASS", "FAIL", "KNOWN", "N/A"]
DATA = Path(__file__).parents[1] / "data"


def runs(client: TestClient, query: str = "") -> dict[str, Any]:
    response = client.get(f"/api/runs?{query}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_one_row_per_arm_with_verdict_counts_and_metadata(client: TestClient) -> None:
    body = runs(client)
    assert body["total"] == len(JOBS) * ARMS == len(body["rows"])
    assert body["columns"] == [*BASE, "gpu", "note", "meta.time"]  # by key; time is a column
    assert [row["job"] for row in body["rows"]] == ["j1"] * 4 + ["j2"] * 4 + ["j3"] * 4
    first = body["rows"][0]
    assert (first["arm"], first["gpu"], first["note"], first["meta.time"]) == (
        "flash_s0",
        "A10G",
        EVIL,
        "2026-10-01T00:00:00Z",
    )
    assert body["rows"][4]["note"] is None  # j2 has no note
    assert first["steps"] == STEPS and first["last_step"] == STEPS - 1
    for job in JOBS:
        verdicts = client.get(f"/api/jobs/{job}").json()["verdicts"]
        counts = {s: sum(v["status"] == s for v in verdicts) for s in ("PASS", "FAIL", "N/A")}
        for row in (r for r in body["rows"] if r["job"] == job):
            assert {s: row[s] for s in counts} == counts
    arms = {(a["arm"], a["final_loss"]) for a in client.get("/api/jobs/j2").json()["arms"]}
    assert {(r["arm"], r["final_loss"]) for r in body["rows"] if r["job"] == "j2"} == arms


@pytest.mark.parametrize(
    "options",
    [
        (),
        ("--job", "j1", "--where", "gpu=A10G"),
        ("--where", "val_loss<3.3"),
        ("--group-by", "gpu"),
    ],
)
def test_the_cli_and_the_server_give_one_runs_table(
    study: Cli, client: TestClient, db_url: str, options: tuple[str, ...]
) -> None:
    """``tracker query runs --format csv`` and ``/api/runs.csv`` of one selection: the same
    header and rows (``api.runs`` the same columns)."""
    printed = study("query", "runs", *options, "--format", "csv").stdout
    pairs = zip(options[::2], options[1::2], strict=True)
    query = urlencode([(option.removeprefix("--").replace("-", "_"), v) for option, v in pairs])
    served = client.get(f"/api/runs.csv?{query}")
    assert served.status_code == 200, served.text
    assert printed.splitlines()[0] == ",".join([*BASE, "gpu", "note", "meta.time"])
    assert printed == served.text
    assert api.runs(db_url).columns == printed.splitlines()[0].split(",")


def test_query_runs_sorts_and_limits_as_the_server(study: Cli, client: TestClient) -> None:
    printed = study("query", "runs", "--sort", "-val_loss", "--limit", "5", "-f", "csv").stdout
    served = client.get("/api/runs.csv?sort=-val_loss").text  # every row: the first 5 alike
    assert printed.splitlines() == served.splitlines()[:6]
    wrong = study("query", "runs", "--sort", "val_los", ok=False)
    assert wrong.exit_code == 1 and wrong.stderr.startswith("Error: no column 'val_los' in the")


def test_sort_any_column_both_ways(client: TestClient) -> None:
    def column(query: str, name: str) -> list[Any]:
        return [row[name] for row in runs(client, query)["rows"]]

    finite = [v for v in column("", "min_loss") if isinstance(v, float)]
    assert [v for v in column("sort=min_loss", "min_loss") if isinstance(v, float)] == sorted(
        finite
    )
    assert column("sort=-min_loss", "min_loss")[: len(finite)] == sorted(finite, reverse=True)
    assert column("sort=-job", "job") == ["j3"] * 4 + ["j2"] * 4 + ["j1"] * 4
    assert column("sort=arm", "arm")[:3] == ["flash_s0"] * 3  # ties stay in job order
    assert column("sort=arm", "job")[:3] == ["j1", "j2", "j3"]
    assert column("sort=note", "note")[:4] == [EVIL] * 4  # missing values last
    refused = client.get("/api/runs?sort=-nope")
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("no column 'nope' in the runs table; its columns:")
    assert "final_loss" in refused.json()["detail"]


def test_filters_text_where_and_verdict(client: TestClient) -> None:
    def arms(query: str) -> list[str]:
        return [f"{row['job']}/{row['arm']}" for row in runs(client, query)["rows"]]

    assert arms("q=l4") == [f"j2/{a}" for a in ("flash_s0", "linear_s0", "ref_s0", "ref_s1")]
    assert arms("q=A10G+REF") == ["j1/ref_s0", "j1/ref_s1", "j3/ref_s0", "j3/ref_s1"]
    assert arms("q=nothing-holds-this") == []
    assert {a.split("/")[0] for a in arms("where=gpu=A10G")} == {"j1", "j3"}
    assert arms("where=gpu=A10G&variant=flash") == ["j1/flash_s0", "j3/flash_s0"]
    every = runs(client)["rows"]
    for status in ("PASS", "FAIL", "N/A"):
        expected = [f"{r['job']}/{r['arm']}" for r in every if r[status]]
        assert arms(f"verdict={status}") == expected
    assert len(arms("verdict=FAIL")) >= ARMS  # j3's shifted state fails its bpp_state check
    bad = client.get("/api/runs?verdict=MAYBE")
    assert (bad.status_code, bad.json()["detail"]) == (
        422,
        "no verdict status 'MAYBE'; choose one of: PASS, FAIL, KNOWN, N/A",
    )
    unknown = client.get("/api/runs?where=gpux=A10G")
    assert unknown.status_code == 422
    assert (
        unknown.json()["detail"]
        == f"no run column or metadata key 'gpux'; {WHERE_KEYS}; metadata: gpu, note, time; "
        "did you mean gpu?"
    )


def test_columns_and_paging(client: TestClient) -> None:
    chosen = runs(client, "columns=job,arm,gpu&columns=FAIL")
    assert chosen["columns"] == ["job", "arm", "gpu", "FAIL"]
    assert all(list(row) == chosen["columns"] for row in chosen["rows"])
    every = runs(client, "sort=-val_loss")["rows"]
    page = runs(client, "sort=-val_loss&offset=5&limit=4")
    assert (page["total"], page["offset"], page["limit"]) == (len(every), 5, 4)
    assert page["rows"] == every[5:9]
    last = runs(client, "sort=-val_loss&offset=10&limit=4")
    assert (last["total"], last["rows"]) == (12, every[10:])
    assert runs(client, "q=l4&limit=1")["total"] == 4
    assert client.get("/api/runs?columns=job,nope").status_code == 422
    assert client.get("/api/runs?limit=0").status_code == 422
    every_view = ("/api/runs", "/api/runs.csv", "/runs")
    for query, detail, paths in (
        ("columns=job,job", "column 'job' is asked for twice", every_view),
        ("columns=arm&columns=job,arm", "column 'arm' is asked for twice", every_view),
        (f"offset={2**63}", "bad parameter 'offset': Input should be less than or equal to",
         ("/api/runs", "/runs")),  # the CSV has every row, no offset
    ):  # fmt: skip
        for path in paths:
            answer = client.get(f"{path}?{query}")
            assert answer.status_code == 422, (path, query)
            assert detail in answer.text


def test_nonfinite_counts_the_loss_curves_nan_and_infinite_points(
    client: TestClient, study: Cli
) -> None:
    study("ingest", str(DATA / "oom_probe"))  # its linear_s0 logs one inf, then 28 nan
    body = runs(client, "sort=-nonfinite")
    counts = {}
    for row in body["rows"]:
        args = ("query", "curve", "--job", row["job"], "--arm", row["arm"], "--format", "json")
        values = [p["value"] for p in json.loads(study(*args).stdout)]
        counts[row["job"], row["arm"]] = sum(
            v is None or v in ("NaN", "Infinity", "-Infinity") for v in values
        )
        assert row["nonfinite"] == counts[row["job"], row["arm"]], row
    assert counts["oom_probe", "linear_s0"] == 29
    assert body["rows"][0]["nonfinite"] == max(counts.values()) > 0  # sorted by it
    assert {r["nonfinite"] for r in body["rows"] if r["arm"] != "linear_s0"} == {0}
    table = list(csv.DictReader(io.StringIO(client.get("/api/runs.csv?job=oom_probe").text)))
    assert {r["arm"]: r["nonfinite"] for r in table}["linear_s0"] == "29"
    html = client.get("/runs?job=oom_probe&columns=arm,nonfinite").text
    assert ">nonfinite</a>" in html and "<td>29</td>" in html


def csv_text(value: Any) -> str:
    """A JSON value as the CSV writes it (NaN nan, missing empty)."""
    if value is None:
        return ""
    if value in ("NaN", "Infinity", "-Infinity"):
        return {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[value]
    if isinstance(value, float):
        assert math.isfinite(value)
    return str(value)


@pytest.mark.parametrize("path", ["/api/runs.csv", "/api/runs"])
def test_csv_equals_the_json_rows(client: TestClient, path: str) -> None:
    query = "sort=-final_loss&where=gpu=A10G&columns=job,arm,final_loss,last_loss,diverged,note"
    response = client.get(f"{path}?{query}&limit=2&format=csv")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(response.text)))
    body = runs(client, f"{query}&limit=100")
    assert table[0] == body["columns"]
    assert len(table) - 1 == body["total"] == 8  # every matching row, whatever the page
    expected = [[csv_text(row[c]) for c in body["columns"]] for row in body["rows"]]
    assert table[1:] == expected
    assert table[1][:4] == ["j1", "linear_s0", "nan", "nan"]  # the diverged ablation sorts first


def test_page_sorts_links_and_escapes(client: TestClient) -> None:
    html = client.get("/runs?sort=final_loss&where=gpu=A10G&limit=5").text
    # escaped, with a line-break opportunity after the slash (metadata wraps at its parts)
    assert EVIL not in html and "&lt;script&gt;alert(1)&lt;/<wbr>script&gt;&amp;" in html
    scripts = ("plotly.min.js", "plotdraw.js", "runs.js")
    for script in scripts:
        html = html.replace(f'<script src="/static/{script}"></script>', "")
    assert "<script" not in html  # no inline script
    assert 'href="/runs?where=gpu%3DA10G&amp;limit=5&amp;sort=-final_loss"' in html  # toggles
    assert 'href="/runs?sort=final_loss&amp;where=gpu%3DA10G&amp;limit=5&amp;offset=5"' in html
    assert 'value="j1/flash_s0"' in html and "/api/runs.csv?sort=final_loss" in html
    assert "8 runs, 1 to 5 shown" in html
    assert all(client.get(f"/static/{script}").status_code == 200 for script in scripts)
    assert client.get("/runs?sort=nope").status_code == 422


def test_api_probes_mirrors_the_library(client: TestClient, study: Cli) -> None:
    cases = [
        ("", ("query", "probes")),
        ("?model=gpt-124m&variant=flash&where=gpu=A10G", ("query", "probes", "--model",
         "gpt-124m", "--variant", "flash", "--where", "gpu=A10G")),
        ("?job=j2&failed=true", ("query", "probes", "--job", "j2", "--failed")),
        ("?group_by=gpu&variant=ref", ("query", "probes", "--group-by", "gpu", "--variant", "ref")),
    ]  # fmt: skip
    for query, args in cases:
        response = client.get(f"/api/probes{query}")
        assert response.status_code == 200, response.text
        assert response.json() == json.loads(study(*args, "--format", "json").stdout)
    assert {row["job"] for row in client.get("/api/probes?where=gpu=L4").json()} == {"j2"}
    unknown = client.get("/api/probes?where=nope=1")
    assert (unknown.status_code, unknown.json()["detail"]) == (
        422,
        f"no run column or metadata key 'nope'; {WHERE_KEYS}; metadata: gpu, note, time",
    )


def test_metadata_is_an_object_everywhere(client: TestClient, study: Cli, db_url: str) -> None:
    expected = {"gpu": "A10G", "note": EVIL, "time": "2026-10-01T00:00:00Z"}
    assert client.get("/api/jobs").json()[0]["meta"] == expected
    assert json.loads(study("jobs", "-f", "json").stdout)[0]["meta"] == expected
    frame = api.jobs(db_url)
    assert frame["meta"].to_list()[1] == {"gpu": "L4", "note": None, "time": "2026-10-15T00:00:00Z"}
    assert frame["meta"].struct.field("gpu").to_list() == ["A10G", "L4", "A10G"]
    (text_row, *_) = csv.DictReader(io.StringIO(study("jobs", "-f", "csv").stdout))
    assert text_row["meta"] == f"gpu=A10G note={EVIL} time=2026-10-01T00:00:00Z"
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert schema["JobRow"]["properties"]["meta"]["type"] == "object"
    assert {"RunsTable", "RunTableRow", "ProbeTableRow"} <= set(schema)


def test_serve_on_a_port_in_use_is_one_line(cli: Cli) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("serve", "--port", str(port), ok=False)
    assert result.exit_code == 1
    assert result.stderr == f"Error: port {port} is in use; pick another with --port\n"
