"""Incremental reports: only what changed is rendered again; job selection by metadata/time."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from sqlalchemy import Engine, text

from tests.conftest import Cli
from tracker.sample import write_sample_job
from tracker.views.across_jobs import note
from tracker.views.pages import IndexView, index_page

# every file is set to this modification time before a report: a file the report wrote has
# another one afterwards, whatever the clock's resolution and the machine's speed
OLD_NS = 1_000_000_000 * 10**9
GENERATED = re.compile(r"generated \S+ by tracker")


def files(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*") if p.is_file())


def age(out: Path) -> None:
    for path in files(out):
        os.utime(path, ns=(OLD_NS, OLD_NS))


def touched(out: Path) -> set[str]:
    """Files written since ``age``: new ones and those with a new modification time."""
    return {str(p.relative_to(out)) for p in files(out) if p.stat().st_mtime_ns != OLD_NS}


def ingest(cli: Cli, root: Path, name: str, *meta: str, seed: int = 0) -> None:
    job = write_sample_job(root / name, seed=seed, steps=60, arms=("ref_s0", "flash_s0"))
    cli("ingest", str(job), *[arg for item in meta for arg in ("--meta", item)])


def job_files(name: str) -> set[str]:
    pages = ("index.html", "mem_scaling.html", "gpt_trajectories.html", "table4.html")
    data = ("mem_analysis.json", "gpt_analysis.json", "verdicts.json")
    return {f"{name}/{file}" for file in pages + data}


def test_second_report_renders_only_the_new_job(cli: Cli, tmp_path: Path) -> None:
    for i, name in enumerate(("job1", "job2")):
        ingest(cli, tmp_path / "jobs", name, seed=i)
    out = tmp_path / "report"
    first = cli("report", "--out", str(out))
    assert first.stdout.splitlines()[0] == "2 job pages rendered, 0 up to date"
    everything = {str(p.relative_to(out)) for p in files(out)}
    assert everything == job_files("job1") | job_files("job2") | {
        "index.html",
        "claims.json",
        "manifest.json",
        "plotly.min.js",
    }

    # nothing changed: only the index is written again (the manifest is the same)
    age(out)
    again = cli("report", "--out", str(out))
    assert again.stdout.splitlines()[0] == "0 job pages rendered, 2 up to date"
    assert touched(out) == {"index.html"}

    # one more job: its pages, the index and the cross-job data (claims, manifest), no other
    ingest(cli, tmp_path / "jobs", "job3", seed=3)
    age(out)
    third = cli("report", "--out", str(out))
    assert third.stdout.splitlines()[0] == "1 job pages rendered, 2 up to date"
    assert touched(out) == job_files("job3") | {"index.html", "claims.json", "manifest.json"}
    claims = json.loads((out / "claims.json").read_text())
    assert claims and {row["n_jobs"] for row in claims} <= {0, 1, 2, 3}
    assert max(row["n_jobs"] for row in claims) == 3
    manifest = json.loads((out / "manifest.json").read_text())
    assert list(manifest["jobs"]) == ["job1", "job2", "job3"]
    assert set(manifest["jobs"]["job3"]["curves"]) == {"ref_s0", "flash_s0"}
    assert 'href="job3/index.html"' in (out / "index.html").read_text()

    # --force: every page again (plotly.min.js and the manifest are the same files, kept)
    age(out)
    forced = cli("report", "--out", str(out), "--force")
    assert forced.stdout.splitlines()[0] == "3 job pages rendered, 0 up to date"
    assert touched(out) == job_files("job1") | job_files("job2") | job_files("job3") | {
        "index.html"
    }

    # a deleted job's pages go
    cli("delete", "job2", "--yes")
    age(out)
    after = cli("report", "--out", str(out))
    assert after.stdout.splitlines()[0] == "0 job pages rendered, 2 up to date, 1 removed"
    assert not (out / "job2").exists()
    assert touched(out) == {"index.html", "claims.json", "manifest.json"}
    assert "job2" not in (out / "index.html").read_text()


def test_a_report_keeps_other_jobs_pages_and_never_overwrites_a_foreign_folder(
    cli: Cli, tmp_path: Path
) -> None:
    for i, name in enumerate(("a", "b", "c")):
        ingest(cli, tmp_path / "jobs", name, seed=i)
    out = tmp_path / "report"
    cli("report", "--out", str(out))
    only_b = cli("report", "--out", str(out), "--job", "b")
    assert only_b.stdout.splitlines()[0] == "0 job pages rendered, 1 up to date"
    assert (out / "a" / "index.html").is_file() and (out / "c" / "index.html").is_file()
    assert 'href="a/index.html"' not in (out / "index.html").read_text()
    # the pages kept are still known: a full report again renders nothing, a deleted job goes
    cli("delete", "c", "--yes")
    again = cli("report", "--out", str(out))
    assert again.stdout.splitlines()[0] == "0 job pages rendered, 2 up to date, 1 removed"
    pruned = cli("report", "--out", str(out), "--job", "b", "--prune")
    assert pruned.stdout.splitlines()[0] == "0 job pages rendered, 1 up to date, 1 removed"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["b"]

    theirs = tmp_path / "site"
    theirs.mkdir()
    (theirs / "index.html").write_text("<h1>my own page</h1>")
    refused = cli("report", "--out", str(theirs), ok=False)
    assert (refused.exit_code, refused.stdout, refused.stderr) == (
        1,
        "",
        f"Error: {theirs} is not empty and holds no report (no manifest.json), whose files a "
        "report would overwrite; write the report into another folder, or give --force\n",
    )
    assert [p.name for p in theirs.iterdir()] == ["index.html"]
    assert (theirs / "index.html").read_text() == "<h1>my own page</h1>"
    cli("report", "--out", str(theirs), "--force")
    assert (theirs / "manifest.json").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    cli("report", "--out", str(empty))  # an empty folder is fine


def test_other_expectations_render_every_page(cli: Cli, tmp_path: Path) -> None:
    ingest(cli, tmp_path / "jobs", "job1")
    out = tmp_path / "report"
    cli("report", "--out", str(out))
    packaged = Path(__file__).parents[1] / "tracker" / "studies" / "flashoptim.toml"
    changed = tmp_path / "expectations.toml"
    changed.write_text(packaged.read_text().replace("bpp_tolerance = 0.05", "bpp_tolerance = 0.5"))
    assert changed.read_text() != packaged.read_text()
    age(out)
    result = cli("report", "--out", str(out), "--expectations", str(changed))
    assert result.stdout.splitlines()[0] == "1 job pages rendered, 0 up to date"
    assert job_files("job1") <= touched(out)


def test_report_selects_jobs_by_metadata_and_time(cli: Cli, tmp_path: Path) -> None:
    times = ("2026-01-01T00:00Z", "2026-02-01T00:00Z", "2026-03-01T00:00Z")
    for i, (gpu, time) in enumerate(zip(("A10G", "H100", "A10G"), times, strict=True)):
        ingest(cli, tmp_path / "jobs", f"job{i + 1}", f"gpu={gpu}", f"time={time}", seed=i)

    def reported(*args: str) -> list[str]:
        out = tmp_path / "-".join(args)
        cli("report", "--out", str(out), *args)
        return list(json.loads((out / "manifest.json").read_text())["jobs"])

    assert reported("--where", "gpu=A10G") == ["job1", "job3"]
    assert reported("--since", "2026-01-15") == ["job2", "job3"]
    assert reported("--where", "gpu=A10G", "--since", "2026-01-15T00:00:00+00:00") == ["job3"]
    # a value or a time that selects no job is an error, never an empty report
    for args, message in (
        (("--where", "gpu=V100"), "no job has gpu=V100; known values: A10G, H100"),
        (
            ("--where", "gpu=H100", "--since", "2026-03-01"),
            "no selected job is at or after 2026-03-01T00:00:00Z; the latest is "
            "2026-02-01T00:00:00Z (job2)",
        ),
    ):
        out = tmp_path / "empty"
        result = cli("report", "--out", str(out), *args, ok=False)
        assert (result.exit_code, result.stderr, out.exists()) == (1, f"Error: {message}\n", False)

    bad = cli("report", "--since", "yesterday", ok=False)
    assert bad.exit_code == 2
    message = " ".join(bad.stderr.replace("\u2502", " ").split())
    assert "Invalid value for --since: time 'yesterday' is not an ISO 8601 date" in message
    bad = cli("report", "--where", "gpu", ok=False)
    # the message names the operators; typer wraps it in a box
    assert bad.exit_code == 2 and "got 'gpu'" in bad.stderr


def test_index_page_is_a_pure_function(tmp_path: Path) -> None:
    view = IndexView(rows=[], tally={"PASS": 0, "FAIL": 0, "N/A": 0}, failing=0, cross=note(0))
    before = set(tmp_path.iterdir())
    text = index_page(view, "generated now", "<b>exp</b>", plotly_src="plotly.min.js")
    assert set(tmp_path.iterdir()) == before
    assert "No jobs in the database." in text and "&lt;b&gt;exp&lt;/b&gt;" in text
    assert 'id="claims"' in text and "No claims were computed for this report." in text


def test_pages_from_the_stored_summary_equal_pages_from_the_points(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    """Reports read each job's summary kept at ingest; without one (deleted here, as for
    other expectations) the job is analysed from its points, and every file is the same."""
    job = write_sample_job(tmp_path / "jobs" / "job1", steps=3000)  # downsampled figures
    cli("ingest", str(job), "--meta", "gpu=A10G")
    cli("report", "--out", str(tmp_path / "stored"))
    with engine.begin() as connection:
        assert connection.execute(text("DELETE FROM job_summary")).rowcount == 1
    cli("report", "--out", str(tmp_path / "from_points"))
    stored, from_points = files(tmp_path / "stored"), files(tmp_path / "from_points")
    assert [p.relative_to(tmp_path / "stored") for p in stored] == [
        p.relative_to(tmp_path / "from_points") for p in from_points
    ]
    for a, b in zip(stored, from_points, strict=True):
        if a.suffix == ".html":  # the pages say when they were generated
            assert GENERATED.sub("", a.read_text()) == GENERATED.sub("", b.read_text()), a
        elif a.name != "manifest.json":  # it names when, too
            assert a.read_bytes() == b.read_bytes(), a
    trajectories = (tmp_path / "stored" / "job1" / "gpt_trajectories.html").read_text()
    assert "5,348 of 15,000 curve points drawn" in trajectories and "(A10G)" in trajectories


def test_a_manifest_of_another_format_renders_every_job_again(cli: Cli, tmp_path: Path) -> None:
    ingest(cli, tmp_path / "jobs", "job1")
    out = tmp_path / "report"
    cli("report", "--out", str(out))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == 2
    del manifest["format"]  # as an earlier tracker wrote it
    (out / "manifest.json").write_text(json.dumps(manifest))
    again = cli("report", "--out", str(out))
    assert again.stdout.splitlines()[0] == "1 job pages rendered, 0 up to date"
    assert json.loads((out / "manifest.json").read_text())["format"] == 2
