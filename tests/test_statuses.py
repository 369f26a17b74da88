"""Verdict statuses that mean something: KNOWN for a known difference from the paper, the
validation loss judged against the job's own baseline, the paper's numbers only for a run of
the paper's length, N/A (never PASS) where an arm has no point or no validation loss, no FAIL
on a clean generated job and a FAIL for each planted fault."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from tests.conftest import Cli, client_for
from tests.stored import kept_verdicts
from tracker.analysis.expectations import Expectations, load_expectations
from tracker.analysis.job import analyze_job
from tracker.analysis.verdict import FAIL, KNOWN, NA, PASS, Verdict
from tracker.domain import JobData, Status
from tracker.sample import write_sample_job
from tracker.store.jobdata import load_job_data
from tracker.views.pages import status_of
from tracker.views.values import counts, failures_first

STEPS = 300
SPLIT_REASON = "known difference: the library keeps split_only's moments in the parameter dtype"
PACKAGED = Path(__file__).parent.parent / "tracker" / "studies" / "flashoptim.toml"


@pytest.fixture
def exp() -> Expectations:
    return load_expectations()


def job_data(cli: Cli, engine: Engine, directory: Path) -> JobData:
    cli("ingest", str(directory))
    with Session(engine) as session:
        return load_job_data(session, directory.name)


def verdicts_of(
    cli: Cli, engine: Engine, directory: Path, exp: Expectations
) -> dict[tuple[str, str], Verdict]:
    found = analyze_job(job_data(cli, engine, directory), exp).verdicts
    by_key = {(v.check, v.subject): v for v in found}
    assert len(by_key) == len(found)
    return by_key


def failing(verdicts: dict[tuple[str, str], Verdict]) -> set[tuple[str, str]]:
    return {key for key, v in verdicts.items() if v.status == FAIL}


def edit_summary(directory: Path, arm: str, **changes: Any) -> None:
    path = directory / f"{arm}.json"
    summary = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None and key == "steps":
            summary.pop(key)
        else:
            summary[key] = value
    path.write_text(json.dumps(summary))


def expectations_with(tmp_path: Path, edit: Callable[[str], str]) -> Expectations:
    custom = tmp_path / "expectations.toml"
    custom.write_text(edit(PACKAGED.read_text()))
    return load_expectations(custom)


# -- the demo and the report --------------------------------------------------------------


def test_the_demo_fails_only_its_planted_faults(
    cli: Cli, engine: Engine, db_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    result = cli("demo", "--steps", str(STEPS), "--dir", str(tmp_path / "jobs"), "--out", str(out))
    # the claims keep their verdicts: a known difference still does not reproduce the paper
    assert "claims: 80 REPRODUCED, 8 MIXED, 2 NOT_REPRODUCED" in result.stdout
    with engine.connect() as connection:
        names = dict(connection.execute(text("SELECT id, name FROM job")).all())
        rows = [
            (names[v["job_id"]], v["check"], v["subject"], v["status"], v["detail"])
            for v in kept_verdicts(connection)
        ]
    fails = {(job, check, subject) for job, check, subject, status, _ in rows if status == FAIL}
    # job1: its out-of-memory probe; job3: that probe and the flash state shifted by 0.5 B/param
    assert {(job, check) for job, check, _ in fails} == {
        ("job1", "probe_failed"),
        ("job3", "probe_failed"),
        ("job3", "bpp_state"),
        ("job3", "table4_optim_gib"),
        ("job3", "gpt2_124m_optim_gib"),
    }
    assert {subject for job, check, subject in fails if check.endswith("optim_gib")} == {
        "flash",
        "gpt-124m/flash",
    }
    known = [(job, check, subject, detail) for job, check, subject, s, detail in rows if s == KNOWN]
    assert sorted((job, check, subject) for job, check, subject, _ in known) == sorted(
        (f"job{n}", check, subject)
        for n in range(1, 7)
        for check, subject in (
            ("table4_optim_gib", "split_only"),
            ("gpt2_124m_optim_gib", "gpt-124m/split_only"),
        )
    )
    assert all(SPLIT_REASON in detail for *_, detail in known)

    index = (out / "index.html").read_text()
    assert "6 jobs, 2 with at least one FAIL;" in index
    table_rows = re.findall(r'<tr class="(\w+)"[^>]*><td class="name"><a [^>]*>(job\d)</a>', index)
    assert sorted(table_rows) == sorted(
        [("fail", "job1"), ("fail", "job3")] + [("pass", f"job{n}") for n in (2, 4, 5, 6)]
    )
    page = (out / "job2" / "index.html").read_text()
    assert '<span class="badge known">KNOWN</span>' in page
    assert '<span class="chip known" data-status="KNOWN">2 KNOWN</span>' in page
    assert '<span class="chip fail zero" data-status="FAIL">0 FAIL</span>' in page
    verdicts = json.loads((out / "job2" / "verdicts.json").read_text())
    assert sum(v["status"] == "KNOWN" for v in verdicts) == 2
    with client_for(db_url) as client:  # the server serves the same page and numbers
        served = client.get("/jobs/job2/").text
        api = client.get("/api/jobs/job2").json()["verdicts"]
    assert '<span class="badge known">KNOWN</span>' in served
    assert api == verdicts

    claims = {(c["claim"], c["subject"]): c for c in json.loads((out / "claims.json").read_text())}
    split = claims["table4_optim", "split_only"]
    assert split["status"] == "NOT_REPRODUCED"
    assert (
        "a known difference (KNOWN) in 6 of them: the library keeps split_only's"
        in (split["detail"])
    )


# -- the generator: clean jobs, planted faults --------------------------------------------


@pytest.mark.parametrize("seed", [0, 7, 11])
def test_a_clean_generated_job_has_no_fail(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations, seed: int
) -> None:
    job = write_sample_job(tmp_path / f"clean{seed}", seed=seed, steps=STEPS, failed_probe=None)
    verdicts = verdicts_of(cli, engine, job, exp)
    assert failing(verdicts) == set()
    assert verdicts["val_loss", "flash_s0"].status == PASS
    assert verdicts["table4_optim_gib", "split_only"].status == KNOWN
    assert SPLIT_REASON in verdicts["table4_optim_gib", "split_only"].detail
    assert verdicts["gpt2_124m_optim_gib", "gpt-124m/split_only"].status == KNOWN


def test_a_flash_val_loss_worse_than_its_ref_fails_the_job(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    job = write_sample_job(
        tmp_path / "worse", steps=STEPS, failed_probe=None, flash_val_loss_shift=0.015
    )
    verdicts = verdicts_of(cli, engine, job, exp)
    assert failing(verdicts) == {("val_loss", "flash_s0")}
    check = verdicts["val_loss", "flash_s0"]
    summaries = {
        arm: json.loads((job / f"{arm}.json").read_text())["val_loss"]
        for arm in ("flash_s0", "ref_s0", "ref_s1")
    }
    base = (summaries["ref_s0"] + summaries["ref_s1"]) / 2
    assert check.measured == pytest.approx(summaries["flash_s0"] - base, abs=1e-12)
    assert (check.expected, check.tolerance) == (0.0, 0.01)
    # the job's seed spread: the two ref seeds, one degree of freedom
    sd = abs(summaries["ref_s0"] - summaries["ref_s1"]) / np.sqrt(2)
    half = stats.t.ppf(0.95, 1) * sd * np.sqrt(1 + 1 / 2)
    assert check.detail == (
        f"final validation loss {summaries['flash_s0']:.4f} (flash_s0) - {base:.4f} "
        f"(mean of ref_s0, ref_s1) = {check.measured:+.4f}; 90% interval "
        f"{check.measured - half:+.4f} to {check.measured + half:+.4f} from the job's seed "
        f"spread (sd {sd:.4f}, 1 df); FAIL only outside ± 0.01"
    )


def test_each_seed_of_the_candidate_is_judged_against_the_jobs_baseline_seeds(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    arms = ("ref_s0", "ref_s1", "flash_s0", "flash_s1", "flash_s2", "linear_s0")
    job = write_sample_job(tmp_path / "seeds", steps=STEPS, arms=arms, failed_probe=None)
    verdicts = verdicts_of(cli, engine, job, exp)
    assert [verdicts["val_loss", f"flash_s{s}"].status for s in range(3)] == [PASS] * 3
    assert "(mean of ref_s0, ref_s1)" in verdicts["val_loss", "flash_s2"].detail
    assert "seed spread: sd " in verdicts["val_loss", "flash_s2"].detail
    assert verdicts["val_loss", "flash_s2"].detail.endswith(" 3 df)")  # 2 + 1 degrees of freedom
    assert failing(verdicts) == set()


def test_a_run_shorter_than_the_papers_leaves_the_paper_check_not_applicable(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    job = write_sample_job(tmp_path / "short", steps=2000, failed_probe=None)
    verdicts = verdicts_of(cli, engine, job, exp)
    for arm in ("ref_s0", "ref_s1", "flash_s0"):
        paper = verdicts["val_loss_paper", arm]
        assert paper.status == NA
        assert paper.detail == "run of 2000 steps; the paper's number is for 20000"
    assert ("val_loss_paper", "linear_s0") not in verdicts  # the paper has no number for it
    assert failing(verdicts) == set()


def test_a_run_of_the_papers_length_is_held_to_the_papers_numbers(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    exp = expectations_with(
        tmp_path, lambda t: t.replace("paper_steps = 20000", f"paper_steps = {STEPS}")
    )
    good = write_sample_job(tmp_path / "good", steps=STEPS, failed_probe=None)
    verdicts = verdicts_of(cli, engine, good, exp)
    for arm in ("ref_s0", "ref_s1", "flash_s0"):
        paper = verdicts["val_loss_paper", arm]
        assert paper.status == PASS
        assert paper.expected == {"ref": 3.263, "flash": 3.265}[arm[:-3]]
        assert paper.detail.startswith("final validation loss ")
        assert f"after {STEPS} steps vs paper {paper.expected:g} ± 0.05" in paper.detail
    far = write_sample_job(
        tmp_path / "far", steps=STEPS, failed_probe=None, flash_val_loss_shift=0.1
    )
    verdicts = verdicts_of(cli, engine, far, exp)
    assert failing(verdicts) == {("val_loss", "flash_s0"), ("val_loss_paper", "flash_s0")}


def test_without_steps_in_the_summary_the_curve_gives_the_run_length(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    exp = expectations_with(
        tmp_path, lambda t: t.replace("paper_steps = 20000", f"paper_steps = {STEPS}")
    )
    job = write_sample_job(tmp_path / "nosteps", steps=STEPS, failed_probe=None)
    edit_summary(job, "ref_s0", steps=None)
    # a summary of more steps than the curve holds: the run stopped early
    edit_summary(job, "ref_s1", steps=STEPS * 2)
    verdicts = verdicts_of(cli, engine, job, exp)
    assert verdicts["val_loss_paper", "ref_s0"].status == PASS  # steps 0..299: 300 steps
    assert verdicts["val_loss_paper", "ref_s1"].detail == (
        f"stopped at step {STEPS - 1} of {STEPS * 2}: not a finished run"
    )
    assert "left out: ref_s1 stopped at step" in verdicts["val_loss", "flash_s0"].detail


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"failed_probe": ("gpt-355m", "ref")}, {("probe_failed", "gpt-355m/ref")}),
        ({"flash_loss_shift": 0.03}, {("ema_delta_vs_seed_noise", "flash_s0")}),
        ({"flash_val_loss_shift": 0.05}, {("val_loss", "flash_s0")}),
        ({"flash_val_loss_shift": -0.05}, {("val_loss", "flash_s0")}),  # suspiciously better
    ],
)
def test_each_planted_fault_fails(
    cli: Cli,
    engine: Engine,
    tmp_path: Path,
    exp: Expectations,
    fault: dict[str, Any],
    expected: set[tuple[str, str]],
) -> None:
    job = write_sample_job(tmp_path / "fault", steps=STEPS, **{"failed_probe": None, **fault})
    assert failing(verdicts_of(cli, engine, job, exp)) == expected


def test_a_shifted_state_fails(cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations) -> None:
    job = write_sample_job(
        tmp_path / "state", steps=STEPS, failed_probe=None, flash_state_shift=0.5
    )
    fails = failing(verdicts_of(cli, engine, job, exp))
    assert ("bpp_state", "gpt-124m/flash") in fails
    assert {check for check, _ in fails} == {"bpp_state", "table4_optim_gib", "gpt2_124m_optim_gib"}
    assert all(subject.endswith("flash") for _, subject in fails)  # split_only stays KNOWN


def test_divergence_where_it_is_not_expected_fails(
    cli: Cli, engine: Engine, tmp_path: Path, exp: Expectations
) -> None:
    job = write_sample_job(tmp_path / "diverging", steps=STEPS, failed_probe=None)
    edit_summary(job, "linear_s0", diverged=False)  # the ablation no longer diverges
    edit_summary(job, "flash_s0", diverged=True, val_loss=None)  # the candidate does
    verdicts = verdicts_of(cli, engine, job, exp)
    assert failing(verdicts) >= {("diverged", "linear_s0"), ("diverged", "flash_s0")}
    assert verdicts["diverged", "linear_s0"].detail == "did not diverge; it was expected to"
    assert verdicts["diverged", "flash_s0"].detail == "diverged; only linear_s0 is expected to"
    assert verdicts["val_loss", "flash_s0"].status == NA
    assert verdicts["val_loss", "flash_s0"].detail == (
        "no validation loss in flash_s0's summary (it diverged): "
        "candidate-vs-baseline comparison not possible"
    )


# -- arms without points or without a validation loss -------------------------------------


def test_an_arm_without_points_or_validation_loss_is_not_applicable_never_pass(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    exp = expectations_with(
        tmp_path, lambda t: t.replace("paper_steps = 20000", f"paper_steps = {STEPS}")
    )
    data = job_data(cli, engine, write_sample_job(tmp_path / "job", steps=STEPS))
    empty = pl.DataFrame(schema={"step": pl.Int64, "value": pl.Float64})
    headers_only = JobData(
        data.name, data.meta, data.probes, data.runs, {**data.curves, "flash_s0": empty}
    )
    verdicts = {(v.check, v.subject): v for v in analyze_job(headers_only, exp).verdicts}
    for key, detail in (
        (("val_loss", "flash_s0"), "flash_s0.csv has no points: candidate-vs-baseline "
         "comparison not possible"),
        (("val_loss_paper", "flash_s0"), "flash_s0.csv has no points"),
    ):  # fmt: skip
        assert (verdicts[key].status, verdicts[key].detail) == (NA, detail)
    assert verdicts["ema_delta_vs_seed_noise", "flash_s0"].status == NA

    no_val_loss = data.runs.with_columns(
        pl.when(pl.col("arm") == "ref_s0")
        .then(None)
        .otherwise(pl.col("val_loss"))
        .alias("val_loss")
    )
    silent = JobData(data.name, data.meta, data.probes, no_val_loss, data.curves)
    verdicts = {(v.check, v.subject): v for v in analyze_job(silent, exp).verdicts}
    # the job's other baseline seed still gives a baseline, without a spread to judge by
    check = verdicts["val_loss", "flash_s0"]
    assert check.status == PASS
    assert "(ref_s1) = " in check.detail
    assert check.detail.endswith("no seed spread in the job: the bare margin ± 0.01 expected")
    assert verdicts["val_loss_paper", "ref_s0"].status == NA
    assert verdicts["val_loss_paper", "ref_s0"].detail == "no validation loss in ref_s0's summary"
    assert verdicts["val_loss_paper", "flash_s0"].status == PASS  # its own summary has one

    linear = JobData(
        data.name, data.meta, data.probes, data.runs, {**data.curves, "linear_s0": empty}
    )
    verdict = next(v for v in analyze_job(linear, exp).verdicts if v.check == "diverged")
    assert (verdict.status, verdict.detail) == (
        NA,
        "linear_s0.csv has no points: divergence check not possible",
    )


# -- counting ----------------------------------------------------------------------------


def test_known_is_counted_apart_and_is_no_failure() -> None:
    def verdict(status: Status) -> Verdict:
        return Verdict("c", "s", None, None, None, status, "")

    found = [verdict(s) for s in (KNOWN, PASS, NA, FAIL, KNOWN)]
    assert counts(found) == {"PASS": 1, "FAIL": 1, "KNOWN": 2, "N/A": 1}
    assert [v.status for v in failures_first(found)] == [FAIL, PASS, KNOWN, KNOWN, NA]
    assert status_of({"PASS": 0, "FAIL": 0, "KNOWN": 2, "N/A": 3}) == "pass"
    assert status_of({"PASS": 4, "FAIL": 1, "KNOWN": 2, "N/A": 0}) == "fail"
    assert status_of({"PASS": 0, "FAIL": 0, "KNOWN": 0, "N/A": 3}) == "na"
    assert Status.KNOWN == "KNOWN"


def test_the_new_expectations_are_checked(tmp_path: Path) -> None:
    from tracker.errors import BadExpectations

    for old, new, problem in (
        ("candidate_margin = 0.01", "candidate_margin = 0", "training.val_loss.candidate_margin "
         "must be > 0, got 0"),
        ("paper_steps = 20000", "paper_steps = 2.5", "training.val_loss.paper_steps must be a "
         "positive integer, got 2.5"),
        ("job_noise_factor = 5.0\n", "", "missing key training.job_noise_factor"),
    ):  # fmt: skip
        with pytest.raises(BadExpectations) as caught:
            expectations_with(tmp_path, lambda t, old=old, new=new: t.replace(old, new))  # type: ignore[misc]
        assert str(caught.value).endswith(problem)
