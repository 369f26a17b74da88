"""Studies are data: each job belongs to one (stored), is judged by its own study's
expectations, and the 8-bit Adam study ships beside FlashOptim's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tracker.analysis.checks import Check
from tracker.analysis.expectations import study_expectations, study_names
from tracker.figures.memory import paper_lines
from tracker.figures.style import FALLBACK_COLORS, Palette, arm_style, variant_label
from tracker.jobdir.sample import SAMPLE_STUDIES, write_sample_job
from tracker.models import Job, JobVerdict

STUDIES_TABLE = """\
name        title       paper                                                                                             claims
----------  ----------  ------------------------------------------------------------------------------------------------  ------
flashoptim  FlashOptim  Gonzalez Ortiz, Gupta, Rinard, Blalock: FlashOptim: Optimizers for Memory Efficient Training      6
adam8bit    8-bit Adam  Dettmers, Lewis, Shleifer, Zettlemoyer: 8-bit Optimizers via Block-wise Quantization (ICLR 2022)  4
"""  # noqa: E501
STUDIES_CSV = """\
name,title,paper,claims
flashoptim,FlashOptim,"Gonzalez Ortiz, Gupta, Rinard, Blalock: FlashOptim: Optimizers for Memory Efficient Training",6
adam8bit,8-bit Adam,"Dettmers, Lewis, Shleifer, Zettlemoyer: 8-bit Optimizers via Block-wise Quantization (ICLR 2022)",4
"""  # noqa: E501


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
    assert cli("studies").stdout == STUDIES_TABLE
    assert cli("studies", "-f", "csv").stdout == STUDIES_CSV
    listed = json.loads(cli("studies", "-f", "json").stdout)
    assert [(row["name"], row["claims"]) for row in listed] == [("flashoptim", 6), ("adam8bit", 4)]


def test_every_packaged_study_loads_and_names_itself() -> None:
    assert study_names() == ["flashoptim", "adam8bit"]
    for name in study_names():
        exp = study_expectations(name)
        assert exp.study is not None and exp.study.name == name
        assert exp.source == f"tracker/studies/{name}.toml (packaged)"
        assert set(SAMPLE_STUDIES[name].variants) >= set(exp.memory.expected_bpp)


def test_figures_draw_each_study_by_its_style() -> None:
    for name in study_names():
        style = study_expectations(name).style
        assert style is not None and style.variants and style.arms, name
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
        arms=SAMPLE_STUDIES["adam8bit"].arms,
        variants=SAMPLE_STUDIES["adam8bit"].variants,
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
    ("args", "message"),
    [
        (("claims", "--study", "adam8bt"), "unknown study 'adam8bt'; the packaged studies: "
         "adam8bit, flashoptim; did you mean adam8bit?"),
        (("report", "--study", "nope"), "unknown study 'nope'; the packaged studies: "
         "adam8bit, flashoptim"),
        (("compare", "a", "b", "--study", "nope"), "unknown study 'nope'; the packaged "
         "studies: adam8bit, flashoptim"),
        (("serve", "--study", "adam8bt"), "unknown study 'adam8bt'; the packaged studies: "
         "adam8bit, flashoptim; did you mean adam8bit?"),
        (("demo", "--study", "flashoptm"), "unknown study 'flashoptm'; the packaged studies: "
         "adam8bit, flashoptim; did you mean flashoptim?"),
    ],
)  # fmt: skip
def test_an_unknown_study_is_one_error_line(
    cli: Cli, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out = () if args[0] in ("claims", "compare", "serve") else ("--out", str(tmp_path / "out"))
    result = cli(*args, *out, ok=False)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {message}\n"


def test_an_unknown_study_in_job_json_fails_that_job(cli: Cli, tmp_path: Path) -> None:
    job = write_sample_job(tmp_path / "jobB", steps=20, probes=False, arms=("ref_s0",))
    (job / "job.json").write_text(json.dumps({"study": "resnet"}))
    result = cli("ingest", str(job), ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {job}: unknown study 'resnet'; the packaged studies: adam8bit, flashoptim\n"
    )
    assert studies_of(cli) == {}


def test_verdicts_are_of_known_checks_and_keep_a_known_reason(cli: Cli, tmp_path: Path) -> None:
    cli("ingest", str(write_sample_job(tmp_path / "jobC", steps=20)))
    engine = create_engine(cli.url)
    with Session(engine) as session:
        query = select(JobVerdict.check, JobVerdict.status, JobVerdict.detail, JobVerdict.known)
        rows = [row._asdict() for row in session.execute(query.order_by(JobVerdict.position))]
    engine.dispose()
    assert {row["check"] for row in rows} <= set(Check)
    known = [row for row in rows if row["status"] == "KNOWN"]
    assert [row["check"] for row in known] == [Check.TABLE4_OPTIM_GIB, Check.GPT2_124M_OPTIM_GIB]
    reason = study_expectations().memory.known_differences["split_only"]
    assert all(row["known"] == reason and row["detail"].endswith(reason) for row in known)
    assert all(row["known"] is None for row in rows if row["status"] != "KNOWN")
