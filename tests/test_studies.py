"""Studies are data: each job belongs to one (stored), is judged by its own study's
expectations, and the 8-bit Adam study ships beside FlashOptim's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, update
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tests.stored import kept_verdicts
from tracker.analysis.checks import CLAIM_OF, Check
from tracker.analysis.expectations import study_expectations, study_names
from tracker.analysis.study_files import use_study_dirs
from tracker.analysis.study_looks import FALLBACK_COLORS
from tracker.errors import known_names
from tracker.figures.memory import paper_lines
from tracker.figures.style import Palette, arm_style, variant_label
from tracker.models import Job
from tracker.sample import sample_study, write_sample_job

PACKAGED = study_names()
SPEEDRUN_JOBS = Path(__file__).parent / "data" / "speedrun"
PACKAGE = Path(__file__).parents[1] / "tracker" / "studies"


def claims(cli: Cli, *args: str) -> list[dict]:
    rows: list[dict] = json.loads(cli("claims", "-f", "json", *args).stdout)
    return rows


def studies_of(cli: Cli) -> dict[str, str]:
    engine = create_engine(cli.url)
    with Session(engine) as session:
        found = {name: study for name, study in session.execute(select(Job.name, Job.study))}
    engine.dispose()
    return found


def test_studies_lists_the_packaged_ones(cli: Cli) -> None:
    expected = []
    for name in PACKAGED:
        exp = study_expectations(name)
        assert exp.study is not None
        expected.append(
            {"name": name, "title": exp.study.title, "paper": exp.study.paper,
             "claims": len(exp.claims)}
        )  # fmt: skip
    assert json.loads(cli("studies", "-f", "json").stdout) == expected
    table = cli("studies").stdout.splitlines()
    assert table[0].split() == ["name", "title", "paper", "claims"]
    assert [line.split()[0] for line in table[2:]] == PACKAGED
    assert [line.split()[-1] for line in table[2:]] == [str(row["claims"]) for row in expected]
    csv = cli("studies", "-f", "csv").stdout.splitlines()
    assert csv[0] == "name,title,paper,claims" and len(csv) == len(PACKAGED) + 1
    assert PACKAGED[0] == "flashoptim"  # the default study first
    assert {"flashoptim", "adam8bit", "speedrun"} <= set(PACKAGED)


def kinds_judged(rows: list[dict]) -> set[str]:
    """The claim kinds the rows of ``tracker claims`` are of."""
    memory = {*CLAIM_OF.values(), "probe_failures"}
    named = {"tracks_within_seed_noise": "tracks_seed_noise", "ablation_diverges": "diverges"}
    found = set()
    for row in rows:
        name = row["claim"]
        kind = "memory" if name in memory else named.get(name, name.rpartition("_")[2])
        found.add(kind)
    return found


@pytest.mark.parametrize("name", PACKAGED)
def test_every_packaged_study_loads_its_demo_runs_and_every_claim_is_judged(
    cli: Cli, tmp_path: Path, name: str
) -> None:
    exp = study_expectations(name)
    assert exp.study is not None and exp.study.name == name
    assert exp.source == f"tracker/studies/{name}.toml (packaged)"
    assert exp.claims, "a study judges the claims it lists"
    args = ("--steps", "10", "--dir", str(tmp_path / "jobs"), "--out", str(tmp_path / "report"))
    assert exp.sample is not None, "every packaged study has a demo"
    assert set(exp.sample.probes) >= set(exp.memory.expected_bpp)
    cli("demo", "--study", name, *args)
    rows = claims(cli, "--study", name)
    # exactly the kinds the file lists: none missing, no phantom row of an unlisted kind
    assert kinds_judged(rows) == {spec.kind for spec in exp.claims}
    # its pages, headed by its own title; a job page shows the figures its claims need
    heading = f"<h1>{exp.study.title} reproduction: 6 jobs</h1>"
    assert heading in (tmp_path / "report" / "index.html").read_text()
    job = (tmp_path / "report" / f"{exp.sample.job_prefix}job1" / "index.html").read_text()
    assert ("Table 4 extrapolation" in job) == ("table4" in exp.memory_checks)
    assert ("Memory: bytes/param" in job) == bool(exp.memory_checks)
    with client_for(cli.url) as client:
        assert heading in client.get("/").text
        assert client.get(f"/jobs/{exp.sample.job_prefix}job1").status_code == 200
        assert client.get("/claims").status_code == 200


def test_studies_draw_their_variants_in_colours_of_their_own() -> None:
    owner: dict[str, str] = {}
    for name in PACKAGED:
        style = study_expectations(name).style
        looks = [] if style is None else [*style.variants.values(), *style.arms.values()]
        for color in {look.color for look in looks}:
            assert owner.setdefault(color, name) == name, f"{color}: {owner[color]} and {name}"
    assert not set(owner) & set(FALLBACK_COLORS)


def test_a_database_of_several_studies_is_headed_by_them(cli: Cli, tmp_path: Path) -> None:
    for name in ("flashoptim", "speedrun"):
        cli("demo", "--study", name, "--steps", "10", "--dir", str(tmp_path / name),
            "--out", str(tmp_path / name / "report"))  # fmt: skip
    cli("report", "--out", str(tmp_path / "report"))
    heading = "<h1>FlashOptim and NanoGPT speedrun reproductions: 12 jobs</h1>"
    assert heading in (tmp_path / "report" / "index.html").read_text()
    with client_for(cli.url) as client:
        assert heading in client.get("/").text
    with client_for(cli.url, study="speedrun") as client:
        assert "<h1>NanoGPT speedrun reproduction: 6 jobs</h1>" in client.get("/").text


def test_the_speedrun_study_judges_real_records(cli: Cli) -> None:
    exp = study_expectations("speedrun")
    records = sorted(SPEEDRUN_JOBS.iterdir())
    cli("ingest", *map(str, records), "--study", "speedrun")
    rows = claims(cli, "--study", "speedrun")
    assert kinds_judged(rows) == {spec.kind for spec in exp.claims}
    assert {row["subject"] for row in rows} == {d.name.split("_", 1)[1] for d in records}


def test_figures_draw_each_study_by_its_style() -> None:
    for name in study_names():
        style = study_expectations(name).style
        if style is None:  # the figures' fallback colours and names
            continue
        assert style.variants, name
        for variant, look in style.variants.items():
            assert variant_label(variant) == look.label
            assert Palette()(variant) == look.color
        for arm, look in style.arms.items():
            assert arm_style(arm, Palette())[:2] == (look.label, look.color)
    assert variant_label("adam8bit") == "8-bit Adam (block-wise)"
    assert arm_style("nostudy_s1", Palette()) == ("nostudy (seed1)", FALLBACK_COLORS[0], "dash")


def test_the_memory_figure_draws_each_study_papers_totals() -> None:
    lines = {name: paper_lines(study_expectations(name)) for name in study_names()}
    assert lines["flashoptim"] == [
        (16.0, "paper: AdamW 16 B/param"),
        (7.125, "paper: FlashAdamW 7.125"),
        (5.125, "paper: +grad release 5.125"),
    ]
    assert lines["adam8bit"] == [
        (16.0, "paper: 32-bit Adam 16 B/param"),
        (10.00390625, "paper: 8-bit Adam 10.0039"),
    ]


def test_demo_of_the_8bit_study_is_judged_by_its_expectations(cli: Cli, tmp_path: Path) -> None:
    args = ("--steps", "10", "--dir", str(tmp_path / "jobs"), "--out", str(tmp_path / "report"))
    out = cli("demo", "--study", "adam8bit", *args).stdout.splitlines()
    assert out[1:4] == [
        "adam8bit-job1: ingested 10 probes (1 failed), 4 arms, 120 points",
        "adam8bit-job2: ingested 10 probes (0 failed), 4 arms, 120 points",
        "adam8bit-job3: ingested 10 probes (1 failed), 3 arms, 90 points",
    ]
    assert set(studies_of(cli).values()) == {"adam8bit"}
    found = {(row["claim"], row["subject"]): row for row in claims(cli)}
    state = found["bpp_state", "gpt-124m/adam8bit"]
    assert (state["status"], state["expected"]) == ("REPRODUCED", 2.00390625)
    assert found["bpp_state", "gpt-124m/adam32"]["expected"] == 8.0
    equivalence = found["val_loss_equivalence", "adam8bit vs adam32"]
    assert (equivalence["tolerance"], equivalence["n_jobs"]) == (0.01, 6)
    assert found["ablation_diverges", "adam8lin_s0"]["status"] == "REPRODUCED"
    assert found["tracks_within_seed_noise", "adam8bit_s0 vs adam32_s0"]["n_jobs"] == 6
    # no FlashOptim number judges these jobs: no Table 4 or appendix claim, no ref or flash
    assert not [key for key in found if key[0].startswith(("table4", "gpt2_124m"))]
    assert not [key for key in found if "/ref" in key[1] or "/flash" in key[1]]
    page = (tmp_path / "report" / "adam8bit-job1" / "index.html").read_text()
    assert "tracker/studies/adam8bit.toml (packaged)" in page


def test_jobs_of_two_studies_are_judged_apart(cli: Cli, tmp_path: Path) -> None:
    flash = write_sample_job(tmp_path / "flash1", steps=20)
    eight = write_sample_job(
        tmp_path / "eight1",
        steps=20,
        arms=sample_study("adam8bit").arms,
        variants=sample_study("adam8bit").probes,
        failed_probe=None,
    )
    (eight / "job.json").write_text(json.dumps({"study": "adam8bit", "gpu": "A10G"}))
    cli("ingest", str(flash))
    cli("ingest", str(eight))
    assert studies_of(cli) == {"eight1": "adam8bit", "flash1": "flashoptim"}
    both = claims(cli)
    assert {row["group"] for row in both} == {"flashoptim", "adam8bit"}
    alone = claims(cli, "--study", "adam8bit")
    assert "group" not in alone[0]
    assert [row for row in both if row["group"] == "adam8bit"] == [
        {"group": "adam8bit", **row} for row in alone
    ]
    compared = cli("compare", "flash1", "flash1", "-f", "json").stdout
    assert "adam8bit" not in compared
    of_study = cli("compare", "eight1", "eight1", "--study", "adam8bit", "-f", "json").stdout
    assert of_study == cli("compare", "eight1", "eight1", "-f", "json").stdout
    for args in (("flash1", "eight1"), ("eight1", "flash1")):
        result = cli("compare", *args, "--study", "adam8bit", ok=False)
        assert result.exit_code == 1
        assert result.stderr == "Error: job 'flash1' is of study 'flashoptim', not 'adam8bit'\n"
    with client_for(cli.url, study="adam8bit") as client:
        assert [row["job"] for row in client.get("/api/jobs").json()] == ["eight1"]
        assert {row["job"] for row in client.get("/api/runs").json()["rows"]} == {"eight1"}
        assert client.get("/api/claims").json() == alone
        home = client.get("/")
        assert home.status_code == 200 and "eight1" in home.text and "flash1" not in home.text
    with client_for(cli.url) as client:
        assert [row["job"] for row in client.get("/api/jobs").json()] == ["flash1", "eight1"]


def test_study_given_at_ingest_wins_over_job_json(cli: Cli, tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "jobA", steps=20, probes=False, arms=("ref_s0",))
    (job / "job.json").write_text(json.dumps({"study": "adam8bit"}))
    cli("ingest", str(job), "--study", "flashoptim")
    assert studies_of(cli) == {"jobA": "flashoptim"}


@pytest.mark.parametrize(
    ("args", "near"),
    [
        (("claims", "--study", "adam8bt"), "adam8bit"),
        (("report", "--study", "nope"), None),
        (("compare", "a", "b", "--study", "nope"), None),
        (("serve", "--study", "adam8bt"), "adam8bit"),
        (("demo", "--study", "flashoptm"), "flashoptim"),
    ],
)
def test_an_unknown_study_is_one_error_line(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], near: str | None
) -> None:
    out = () if args[0] in ("claims", "compare", "serve") else ("--out", str(tmp_path / "out"))
    result = cli(*args, *out, ok=False)
    assert result.exit_code == 1
    study = args[args.index("--study") + 1]
    guess = f"; did you mean {near}?" if near else ""
    assert result.stderr == (
        f"Error: unknown study {study!r}; the known studies: {', '.join(sorted(PACKAGED))}{guess}\n"
    )


def test_an_unknown_study_in_job_json_fails_that_job(cli: Cli, tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "jobB", steps=20, probes=False, arms=("ref_s0",))
    (job / "job.json").write_text(json.dumps({"study": "resnet"}))
    result = cli("ingest", str(job), ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {job}: unknown study 'resnet'; the known studies: {', '.join(sorted(PACKAGED))}\n"
    )
    assert studies_of(cli) == {}


def test_verdicts_are_of_known_checks_and_keep_a_known_reason(cli: Cli, tmp_path: Path) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "jobC", steps=20)))
    engine = create_engine(cli.url)
    with engine.connect() as connection:
        rows = kept_verdicts(connection)
    engine.dispose()
    assert {row["check"] for row in rows} <= set(Check)
    known = [row for row in rows if row["status"] == "KNOWN"]
    assert [row["check"] for row in known] == [Check.TABLE4_OPTIM_GIB, Check.GPT2_124M_OPTIM_GIB]
    reason = study_expectations().memory.known_differences["split_only"]
    assert all(row["known"] == reason and row["detail"].endswith(reason) for row in known)
    assert all(row["known"] is None for row in rows if row["status"] != "KNOWN")


@pytest.fixture
def lion(tmp_path: Path) -> Iterator[Path]:
    """A directory holding a study of the user's: a copy of the 8-bit Adam study named lion,
    without colours of its own (the figures' fallback ones)."""
    text = (PACKAGE / "adam8bit.toml").read_text()
    text = text[: text.index("[style.variants]")] + text[text.index("\n[sample]\n") :]
    text = text.replace('name = "adam8bit"', 'name = "lion"').replace('"adam8bit-"', '"lion-"')
    directory = tmp_path / "studies"
    directory.mkdir()
    (directory / "lion.toml").write_text(text.replace('title = "8-bit Adam"', 'title = "Lion"'))
    yield directory
    use_study_dirs([])  # the in-process commands' --studies, for the next test's server


def test_a_study_outside_the_package_is_listed_judged_and_has_a_demo(
    cli: Cli, tmp_path: Path, lion: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [row["name"] for row in json.loads(cli("studies", "-f", "json").stdout)]
    assert "lion" not in names
    listed = json.loads(cli("--studies", str(lion), "studies", "-f", "json").stdout)
    assert [row["name"] for row in listed] == sorted([*names, "lion"], key=names_order)
    monkeypatch.setenv("TRACKER_STUDIES", f"{tmp_path / 'none'}:{lion}")
    result = cli("studies", ok=False)
    assert (result.exit_code, result.stderr) == (
        1, f"Error: TRACKER_STUDIES: {tmp_path / 'none'} is not a directory of study files\n"
    )  # fmt: skip
    monkeypatch.setenv("TRACKER_STUDIES", str(lion))
    args = ("--steps", "10", "--dir", str(tmp_path / "jobs"), "--out", str(tmp_path / "report"))
    cli("demo", "--study", "lion", *args)
    rows = claims(cli, "--study", "lion")
    assert kinds_judged(rows) == {spec.kind for spec in study_expectations("lion").claims}
    page = (tmp_path / "report" / "lion-job1" / "index.html").read_text()
    assert f"{lion / 'lion.toml'}" in page
    assert "<h1>Lion reproduction: 6 jobs</h1>" in (tmp_path / "report" / "index.html").read_text()


def names_order(name: str) -> tuple[bool, str]:
    return name != "flashoptim", name


def test_two_studies_of_one_name_are_refused_naming_both(
    cli: Cli, tmp_path: Path, lion: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "lion.toml").write_text((lion / "lion.toml").read_text())
    result = cli("--studies", str(lion), "--studies", str(other), "studies", ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: two studies named 'lion': {lion / 'lion.toml'} and {other / 'lion.toml'}; "
        "rename one (its file and its [study] name)\n",
    )
    (other / "lion.toml").rename(other / "speedrun.toml")
    result = cli("--studies", str(other), "claims", ok=False)
    assert result.stderr == (
        f"Error: two studies named 'speedrun': tracker/studies/speedrun.toml (packaged) and "
        f"{other / 'speedrun.toml'}; rename one (its file and its [study] name)\n"
    )


def test_a_study_without_sample_jobs_has_no_demo(cli: Cli, tmp_path: Path, lion: Path) -> None:
    text = (lion / "lion.toml").read_text()
    (lion / "lion.toml").write_text(text[: text.index("\n[sample]\n")])
    args = ("--dir", str(tmp_path / "jobs"), "--out", str(tmp_path / "report"))
    result = cli("--studies", str(lion), "demo", "--study", "lion", *args, ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: study 'lion' has no sample jobs for the demo; the studies that have: "
        f"{known_names(PACKAGED)}\n",
    )
    assert not (tmp_path / "jobs").exists()


def test_jobs_of_a_study_whose_file_is_gone_are_shown_not_judged(
    cli: Cli, tmp_path: Path, lion: Path
) -> None:
    args = ("--steps", "10", "--out", str(tmp_path / "report"))
    cli("--studies", str(lion), "demo", "--study", "lion", "--dir", str(tmp_path / "l"), *args)
    cli("demo", "--dir", str(tmp_path / "f"), *args)
    (lion / "lion.toml").unlink()  # a teammate's database, without the teammate's study
    engine = create_engine(cli.url)  # and of jobs stored before databases kept their studies
    with engine.begin() as connection:
        connection.execute(update(Job).values(study_digest=None))
    engine.dispose()
    rows = claims(cli)
    assert {row["group"] for row in rows} == {"flashoptim"}
    assert claims(cli, "--study", "flashoptim") == [
        {key: value for key, value in row.items() if key != "group"} for row in rows
    ]
    jobs = json.loads(cli("jobs", "-f", "json").stdout)
    assert len(jobs) == 12
    cli("report", "--out", str(tmp_path / "all"))
    why = (
        "study &#39;lion&#39; has no file here (packaged, --studies or TRACKER_STUDIES: "
        "lion.toml): its jobs are stored, not judged"
    )
    assert why in (tmp_path / "all" / "lion-job1" / "index.html").read_text()
    with client_for(cli.url) as client:
        home = client.get("/")
        assert home.status_code == 200
        assert "<h1>FlashOptim and lion reproductions: 12 jobs</h1>" in home.text
        assert client.get("/claims").status_code == 200
        assert client.get("/api/claims").json() == rows
        page = client.get("/jobs/lion-job1")
        assert page.status_code == 200 and why in page.text


def test_a_comparison_is_judged_against_the_second_jobs_study_alone(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jobs of two studies with the same subjects (a user's copy of FlashOptim): `tracker
    compare`, the server's comparison and the home page's latest one all judge the later job
    against the jobs of its own study, never the other's."""
    directory = tmp_path / "studies"
    directory.mkdir()
    text = (PACKAGE / "flashoptim.toml").read_text()
    (directory / "copy.toml").write_text(text.replace('name = "flashoptim"', 'name = "copy"'))
    monkeypatch.setenv("TRACKER_STUDIES", str(directory))
    for name, seed in (("flash1", 0), ("flash2", 1), ("copy1", 2), ("copy2", 3), ("copy3", 4)):
        job = write_sample_job(tmp_path / name, seed=seed, steps=20)
        if name.startswith("copy"):
            (job / "job.json").write_text(json.dumps({"study": "copy"}))
        cli("ingest", str(job))
    expected = json.loads(cli("compare", "copy2", "copy3", "-f", "json").stdout)
    rules = " ".join(row["rule"] or "" for row in expected)
    assert "copy1" in rules and "flash" not in rules
    try:
        with client_for(cli.url) as client:
            served = client.get("/api/compare", params={"a": "copy2", "b": "copy3"}).json()
            home = client.get("/").text
    finally:
        use_study_dirs([])
    assert served["table"] == expected
    assert "flash1, " not in home[home.index('id="compare"') :]
