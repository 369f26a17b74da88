"""The tracker's analysis against the study script's outputs, and its verdicts.

Golden tests ingest each sample job of ``tests/golden/cases.py`` through the real CLI, load
it back from the database and compare ``analyze_job``'s two documents with the reference
script's files: equal exactly (floats bit for bit), the reference's NaN being the tracker's
None. When the reference script itself is at hand, it is also run as an oracle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from pydantic import ValidationError
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.golden.cases import CASES, OUTPUTS, run_reference
from tracker.analysis.expectations import Expectations, load_expectations
from tracker.analysis.job import JobAnalysis, analyze_job
from tracker.analysis.memory import PROBE_SCHEMA as MEMORY_PROBE_SCHEMA
from tracker.analysis.memory import memory_analysis, memory_verdicts
from tracker.analysis.training import analyze_training
from tracker.analysis.verdict import FAIL, NA, PASS, Verdict
from tracker.errors import BadExpectations
from tracker.jobdir.reader import parse_curve_csv
from tracker.jsonio import to_json
from tracker.sample import OOM_ERROR, write_sample_job
from tracker.store.jobdata import JobData, load_job_data

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden"
REFERENCE = REPO.parent / "shared" / "reference" / "analyze_job2.py"
STEPS = 400  # crafted training tests; the goldens use the cases' own steps

PROBE_SCHEMA: dict[str, Any] = {**MEMORY_PROBE_SCHEMA, "extra": pl.Object}
RUN_SCHEMA: dict[str, Any] = {
    "arm": pl.String,
    "model": pl.String,
    "variant": pl.String,
    "seed": pl.Int64,
    "val_loss": pl.Float64,
    "final_loss": pl.Float64,
    "diverged": pl.Boolean,
    "extra": pl.Object,
}


@pytest.fixture(scope="module")
def exp() -> Expectations:
    return load_expectations()


def nan_to_none(obj: Any) -> Any:
    """The reference writes NaN where the tracker has None."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, dict):
        return {key: nan_to_none(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [nan_to_none(value) for value in obj]
    return obj


def assert_same(got: Any, want: Any, where: str = "") -> None:
    """Equal exactly (floats bit for bit), with the mismatching path in the message."""
    if isinstance(want, dict):
        assert isinstance(got, dict), where
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for key in want:
            assert_same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for index, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same(a, b, f"{where}[{index}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"
        assert (got is None) == (want is None), where


def ingest_and_analyze(cli: Cli, engine: Engine, job: Path, exp: Expectations) -> JobAnalysis:
    cli("ingest", str(job))
    with Session(engine) as session:
        data = load_job_data(session, job.name)
    return analyze_job(data, exp)


# -- golden files and the reference script ---------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_matches_golden_files(
    case: str, tmp_path: Path, cli: Cli, engine: Engine, exp: Expectations
) -> None:
    job = write_sample_job(tmp_path / "job2", **CASES[case])
    result = ingest_and_analyze(cli, engine, job, exp)
    for name, got in zip(OUTPUTS, (result.mem, result.gpt), strict=True):
        want = nan_to_none(json.loads((GOLDEN / case / name).read_text()))
        assert_same(got, want, f"{case}/{name}")
    json.loads(to_json(result), parse_constant=lambda token: pytest.fail(f"bare {token}"))


@pytest.mark.parametrize("case", list(CASES))
def test_matches_reference_script(
    case: str, tmp_path: Path, cli: Cli, engine: Engine, exp: Expectations
) -> None:
    if not REFERENCE.is_file():
        pytest.skip(f"reference script not found at {REFERENCE}: goldens only")
    pytest.importorskip("plotly", reason="the reference script draws with plotly")
    job = write_sample_job(tmp_path / "job2", **CASES[case])
    out = run_reference(REFERENCE, job, tmp_path / "cwd")
    result = ingest_and_analyze(cli, engine, job, exp)
    for name, got in zip(OUTPUTS, (result.mem, result.gpt), strict=True):
        want = nan_to_none(json.loads((out / name).read_text()))
        assert_same(got, want, f"reference {case}/{name}")


def test_full_job_verdicts_and_notes(
    tmp_path: Path, cli: Cli, engine: Engine, exp: Expectations
) -> None:
    job = write_sample_job(tmp_path / "job2", steps=STEPS)
    result = ingest_and_analyze(cli, engine, job, exp)
    assert result.notes == []
    by_key = {(v.check, v.subject): v for v in result.verdicts}
    assert len(by_key) == len(result.verdicts)  # one verdict per check and subject
    assert by_key["probe_failed", "gpt-355m/ref"].status == FAIL
    assert by_key["ema_delta_vs_seed_noise", "flash_s0"].status == PASS
    assert by_key["diverged", "linear_s0"].status == PASS
    # the job's own check: the candidate against the baseline of its seed; the paper's
    # numbers, per arm, only for a run of the paper's length (N/A here)
    assert {s for (c, s) in by_key if c == "val_loss"} == {"flash_s0"}
    assert by_key["val_loss", "flash_s0"].status == PASS
    assert {s for (c, s) in by_key if c == "val_loss_paper"} == {"ref_s0", "ref_s1", "flash_s0"}
    document = json.loads(to_json(result))
    assert document["gpt"]["linear_final_loss"] is None


# -- crafted probe frames ---------------------------------------------------------------


def probe(model: str, variant: str, n: int, params: float, state: float, grads: float) -> dict:
    return {
        "model": model,
        "variant": variant,
        "n_params": n,
        "bpp_params": params,
        "bpp_state": state,
        "bpp_grads": grads,
        "bpp_params_state_grads": params + state + grads,
        "peak_steady": int(n * (params + state + grads) * 3),
        "error": None,
        "extra": {"torch_version": "2.5.1"},
    }


def failure(model: str, variant: str, error: str | None, **extra: Any) -> dict:
    return {"model": model, "variant": variant, "error": error, "extra": extra}


def probes(*records: dict) -> pl.DataFrame:
    rows = [{name: record.get(name) for name in PROBE_SCHEMA} for record in records]
    return pl.DataFrame(rows, schema=PROBE_SCHEMA)


def find(verdicts: list[Verdict], check: str, subject: str) -> Verdict:
    matches = [v for v in verdicts if v.check == check and v.subject == subject]
    assert len(matches) == 1, (check, subject, verdicts)
    return matches[0]


# Analytic bytes/param for each Table 4 variant; split_only's states are 9 B/param in the
# paper's Table 4 (67.3 GiB for 8.03 B parameters).
TABLE4_BPP = {
    "ref": (4.0, 8.0, 4.0),
    "flash": (2.0, 3.125, 2.0),
    "split_only": (2.0, 9.0, 2.0),
    "quant_only": (4.0, 2.125, 4.0),
}


def test_bpp_pass_and_fail(exp: Expectations) -> None:
    frame = probes(probe("gpt-124m", "ref", 124_439_808, 4.01, 8.2, 3.96))
    verdicts = memory_verdicts(frame, exp)
    params = find(verdicts, "bpp_params", "gpt-124m/ref")
    assert (params.status, params.measured, params.expected) == (PASS, 4.01, 4.0)
    assert params.tolerance == 0.05
    state = find(verdicts, "bpp_state", "gpt-124m/ref")
    assert (state.status, state.measured, state.expected) == (FAIL, 8.2, 8.0)
    assert find(verdicts, "bpp_grads", "gpt-124m/ref").status == PASS


def test_bpp_not_applicable_without_an_expectation(exp: Expectations) -> None:
    frame = probes(
        probe("gpt-124m", "split_only", 124_439_808, 2.0, 4.0, 2.0),
        probe("gpt-124m", "mystery", 124_439_808, 1.0, 1.0, 1.0),
    )
    verdicts = memory_verdicts(frame, exp)
    state = find(verdicts, "bpp_state", "gpt-124m/split_only")
    assert (state.status, state.expected, state.measured) == (NA, None, 4.0)
    assert "no analytic" in state.detail
    assert find(verdicts, "bpp_params", "gpt-124m/split_only").status == PASS
    for check in ("bpp_params", "bpp_state", "bpp_grads"):
        unknown = find(verdicts, check, "gpt-124m/mystery")
        assert unknown.status == NA and "'mystery'" in unknown.detail


def test_table4_rows_for_all_four_variants(exp: Expectations) -> None:
    records = []
    for variant, (p, s, g) in TABLE4_BPP.items():
        records.append(probe("gpt-355m", variant, 354_823_168, p, s, g))
        # smaller: not the one extrapolated
        records.append(probe("gpt-124m", variant, 124_439_808, p + 1, s + 1, g))
        # larger but not a scaling model (no "gpt" prefix): ignored, as by the script
        records.append(probe("resnet-2b", variant, 2_000_000_000, p + 5, s + 5, g))
    frame = probes(*records)
    verdicts = memory_verdicts(frame, exp)
    table4 = [v for v in verdicts if v.check.startswith("table4_")]
    assert [(v.check, v.subject) for v in table4] == [
        (check, variant)
        for variant in TABLE4_BPP
        for check in ("table4_params_gib", "table4_optim_gib")
    ]
    gib, n = 2**30, 8_030_261_248
    for variant, (p, s, _) in TABLE4_BPP.items():
        params = find(verdicts, "table4_params_gib", variant)
        optim = find(verdicts, "table4_optim_gib", variant)
        assert params.measured == p * n / gib and optim.measured == s * n / gib
        assert params.expected == exp.memory.table4.rows[variant].params
        assert (params.status, optim.status) == (PASS, PASS), (params, optim)
        assert optim.tolerance == pytest.approx(0.05 * exp.memory.table4.rows[variant].optim)
        assert "gpt-355m" in optim.detail
    # the script's table keeps ref and flash only, from the same largest model
    t4 = memory_analysis(frame, exp)["table4_extrapolation"]
    assert list(t4) == ["ref", "flash"]
    assert t4["ref"] == {
        "pred_params_gib": round(4.0 * n / gib, 1),
        "paper_params": 29.9,
        "pred_optim_gib": round(8.0 * n / gib, 1),
        "paper_optim": 59.8,
    }


def test_table4_not_measured_and_gpt2_124m(exp: Expectations) -> None:
    frame = probes(
        probe("gpt-124m", "ref", 124_439_808, 4.0, 8.0, 4.0),
        failure("gpt-124m", "flash", OOM_ERROR),
    )
    verdicts = memory_verdicts(frame, exp)
    for variant in ("flash", "split_only", "quant_only"):
        assert find(verdicts, "table4_optim_gib", variant).status == NA
    assert find(verdicts, "table4_optim_gib", "ref").status == PASS
    params = find(verdicts, "gpt2_124m_params_gib", "gpt-124m/ref")
    assert params.measured == 4.0 * 124_439_808 / 2**30
    assert (params.status, params.expected) == (PASS, 0.46)
    assert find(verdicts, "gpt2_124m_optim_gib", "gpt-124m/ref").status == PASS
    flash = find(verdicts, "gpt2_124m_params_gib", "gpt-124m/flash")
    assert (flash.status, flash.detail) == (NA, "probe failed")
    assert find(verdicts, "gpt2_124m_optim_gib", "gpt-124m/quant_only").detail == "not measured"


def test_probe_failed_and_its_original_record(exp: Expectations) -> None:
    frame = probes(
        probe("gpt-30m", "ref", 30_339_456, 4.0, 8.0, 4.0),
        failure("gpt-355m", "ref", "CUDA out of memory.\nTraceback ...", exit_code=1),
        failure("resnet50", "flash", None),
    )
    verdicts = [v for v in memory_verdicts(frame, exp) if v.check == "probe_failed"]
    assert [(v.subject, v.status, v.detail) for v in verdicts] == [
        ("gpt-355m/ref", FAIL, "CUDA out of memory."),
        ("resnet50/flash", FAIL, "the probe failed without an error message"),
    ]
    assert memory_analysis(frame, exp)["failed_probes"] == [
        {
            "model": "gpt-355m",
            "variant": "ref",
            "error": "CUDA out of memory.\nTraceback ...",
            "exit_code": 1,
        },
        {"model": "resnet50", "variant": "flash"},
    ]


def test_memory_script_quirks(exp: Expectations) -> None:
    small = probe("gpt-30m", "flash", 30_339_456, 2.0123, 3.2, 2.0)
    frame = probes(
        probe("gpt-355m", "flash", 354_823_168, 2.0, 3.125, 2.0),
        small,
        probe("gpt-124m", "ref", 124_439_808, 4.0, 8.0, 4.0),  # one size only
        probe("bert-1b", "flash", 1_000_000_000, 2.0, 3.125, 2.0),  # not a scaling model
    )
    mem = memory_analysis(frame, exp)
    assert [row["model"] for row in mem["rows"]] == ["gpt-355m", "gpt-30m", "gpt-124m", "bert-1b"]
    assert mem["rows"][1]["bpp_params"] == 2.012  # round(2.0123, 3)
    assert mem["rows"][1]["peak_bpp"] == round(small["peak_steady"] / small["n_params"], 3)
    assert mem["rows"][1]["exp_state"] == 3.125
    assert list(mem["verdicts"]) == ["flash"]  # ref has one size
    assert list(mem["verdicts"]["flash"]["bpp_by_size"]) == ["30M", "355M"]
    assert mem["verdicts"]["flash"]["bpp_at_largest"] == 7.125


def test_empty_probe_frame_gives_the_empty_document(exp: Expectations) -> None:
    empty = probes()
    assert memory_analysis(empty, exp) == {
        "rows": [],
        "verdicts": {},
        "table4_extrapolation": {},
        "failed_probes": [],
    }
    verdicts = memory_verdicts(empty, exp)
    assert {v.status for v in verdicts} == {NA}  # Table 4 and GPT-2 rows: not measured


# -- training: the sample job's arms read straight from its files ------------------------


def arms_of(job: Path) -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
    rows, curves = [], {}
    for csv_path in sorted(job.glob("*.csv")):
        arm = csv_path.stem
        variant, seed = arm.rsplit("_s", 1)
        summary = json.loads(csv_path.with_suffix(".json").read_text())
        rows.append(
            {
                "arm": arm,
                "model": summary.get("model"),
                "variant": variant,
                "seed": int(seed),
                "val_loss": summary.get("val_loss"),
                "final_loss": summary.get("final_loss"),
                "diverged": summary.get("diverged"),
                "extra": {},
            }
        )
        curve = parse_curve_csv(csv_path.name, csv_path.read_bytes())
        curves[arm] = curve.select("step", pl.col("loss").alias("value")).drop_nulls()
    return pl.DataFrame(rows, schema=RUN_SCHEMA), curves


@pytest.fixture(scope="module")
def sample_arms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any, Any]]:
    job = write_sample_job(tmp_path_factory.mktemp("arms") / "job", steps=STEPS, probes=False)
    runs, curves = arms_of(job)
    yield job, runs, curves


def test_ema_vs_seed_noise_passes_on_the_sample_job(
    sample_arms: tuple[Path, pl.DataFrame, dict], exp: Expectations
) -> None:
    _, runs, curves = sample_arms
    result = analyze_training(runs, curves, exp)
    gpt = result.gpt
    verdict = find(result.verdicts, "ema_delta_vs_seed_noise", "flash_s0")
    assert verdict.status == PASS
    # the verdict smooths with `smooth` (per step, debiased); the script's numbers keep its
    # `ema`: the two agree closely in the second half, but are not the same number
    assert verdict.measured == result.tracking["ema_delta"]
    assert verdict.expected == result.tracking["seed_noise"] * exp.training.job_noise_factor
    assert verdict.measured == pytest.approx(
        gpt["flash_vs_ref_mean_abs_ema_delta_2nd_half"], rel=0.02
    )
    assert verdict.measured != gpt["flash_vs_ref_mean_abs_ema_delta_2nd_half"]
    assert isinstance(verdict.measured, float) and isinstance(verdict.expected, float)
    assert verdict.measured < verdict.expected


def test_ema_vs_seed_noise_fails_when_the_candidate_is_shifted(
    sample_arms: tuple[Path, pl.DataFrame, dict], exp: Expectations
) -> None:
    _, runs, curves = sample_arms
    shifted = {**curves, "flash_s0": curves["flash_s0"].with_columns(pl.col("value") + 0.05)}
    verdict = find(
        analyze_training(runs, shifted, exp).verdicts, "ema_delta_vs_seed_noise", "flash_s0"
    )
    assert verdict.status == FAIL
    assert verdict.measured == pytest.approx(0.05, abs=0.01)


def test_linear_arm_diverged_and_val_losses(
    sample_arms: tuple[Path, pl.DataFrame, dict], exp: Expectations
) -> None:
    _, runs, curves = sample_arms
    verdicts = analyze_training(runs, curves, exp).verdicts
    diverged = find(verdicts, "diverged", "linear_s0")
    assert (diverged.status, diverged.measured, diverged.expected) == (PASS, True, True)
    assert find(verdicts, "val_loss", "flash_s0").status == PASS
    assert find(verdicts, "val_loss_paper", "ref_s0").status == NA  # not the paper's length
    assert not [v for v in verdicts if v.check.startswith("val_loss") and v.subject == "linear_s0"]
    calm = runs.with_columns(
        pl.when(pl.col("arm") == "linear_s0").then(False).otherwise("diverged").alias("diverged")
    )
    assert (
        find(analyze_training(calm, curves, exp).verdicts, "diverged", "linear_s0").status == FAIL
    )


def test_without_seed_twin_the_noise_check_is_not_applicable(
    sample_arms: tuple[Path, pl.DataFrame, dict], exp: Expectations
) -> None:
    _, runs, curves = sample_arms
    runs = runs.filter(pl.col("arm") != "ref_s1")
    curves = {arm: c for arm, c in curves.items() if arm != "ref_s1"}
    gpt = analyze_training(runs, curves, exp).gpt
    assert "seed_noise_mean_abs_ema_delta_2nd_half" not in gpt
    verdict = find(
        analyze_training(runs, curves, exp).verdicts, "ema_delta_vs_seed_noise", "flash_s0"
    )
    assert verdict.status == NA
    assert verdict.detail == "arm ref_s1 missing: seed-noise check not possible"
    assert verdict.measured == analyze_training(runs, curves, exp).tracking["ema_delta"]
    assert verdict.measured == pytest.approx(
        gpt["flash_vs_ref_mean_abs_ema_delta_2nd_half"], rel=0.02
    )


def test_curves_are_aligned_on_common_steps(
    sample_arms: tuple[Path, pl.DataFrame, dict], exp: Expectations
) -> None:
    _, runs, curves = sample_arms
    # the seed twin is shorter, the candidate lacks a step in the middle: the candidate
    # window is the steps ref_s0 and flash_s0 share, the noise window the steps all three do
    short = {
        **curves,
        "ref_s1": curves["ref_s1"].head(300),
        "flash_s0": curves["flash_s0"].filter(pl.col("step") != 100),
    }
    gpt = analyze_training(runs, short, exp).gpt
    alpha = exp.training.ema_alpha

    def ema(values: list[float]) -> list[float]:
        out, m = [], None
        for x in values:
            m = x if m is None else (1 - alpha) * m + alpha * x
            out.append(m)
        return out

    def smoothed(curve: pl.DataFrame) -> dict[int, float]:
        return dict(zip(curve["step"], ema(curve["value"].to_list()), strict=True))

    r0, f0, s1 = (smoothed(c) for c in (curves["ref_s0"], short["flash_s0"], short["ref_s1"]))
    common = [s for s in r0 if s in f0]
    n = len(common)
    window = common[n // 2 :]
    expected = sum(abs(r0[s] - f0[s]) for s in window) / (n - n // 2)
    assert gpt["flash_vs_ref_mean_abs_ema_delta_2nd_half"] == expected
    common3 = [s for s in common if s in s1]
    n1 = len(common3)
    noise = sum(abs(r0[s] - s1[s]) for s in common3[n1 // 2 :]) / (n1 - n1 // 2)
    assert gpt["seed_noise_mean_abs_ema_delta_2nd_half"] == noise


def test_missing_arms_never_raise(exp: Expectations) -> None:
    runs = pl.DataFrame(schema=RUN_SCHEMA)
    assert analyze_training(runs, {}, exp).gpt == {}
    assert analyze_training(runs, {}, exp).verdicts == []
    only_linear = pl.DataFrame(
        [
            {
                "arm": "linear_s0",
                "model": "gpt-124m",
                "variant": "linear",
                "seed": 0,
                "val_loss": None,
                "final_loss": math.inf,
                "diverged": True,
                "extra": {},
            }
        ],
        schema=RUN_SCHEMA,
    )
    assert analyze_training(only_linear, {}, exp).gpt == {}  # the script needs ref_s0 + flash_s0
    verdicts = analyze_training(only_linear, {}, exp).verdicts
    assert find(verdicts, "diverged", "linear_s0").status == PASS
    ema_check = find(verdicts, "ema_delta_vs_seed_noise", "flash_s0")
    assert (ema_check.status, ema_check.detail) == (
        NA,
        "arm ref_s0 missing: candidate-vs-baseline comparison not possible",
    )


def test_arm_without_curve_points_gives_none_not_a_crash(exp: Expectations) -> None:
    rows = [
        {"arm": arm, "model": "gpt-124m", "variant": arm[:-3], "seed": 0, "val_loss": 3.26}
        for arm in ("ref_s0", "flash_s0")
    ]
    runs = pl.DataFrame(rows).with_columns(pl.col("seed").cast(pl.Int64))
    gpt = analyze_training(runs, {}, exp).gpt
    assert gpt == {
        "flash_vs_ref_mean_abs_ema_delta_2nd_half": None,
        "final_val_loss": {"ref_s0": 3.26, "flash_s0": 3.26},
    }


# -- whole jobs -----------------------------------------------------------------------


def job_data(probe_frame: pl.DataFrame, runs: pl.DataFrame, curves: dict) -> JobData:
    return JobData("crafted", {}, probe_frame, runs, curves)


def test_job_without_probes_or_arms(
    sample_arms: tuple[Path, pl.DataFrame, dict], exp: Expectations
) -> None:
    _, runs, curves = sample_arms
    no_probes = analyze_job(job_data(probes(), runs, curves), exp)
    assert no_probes.mem == {}
    assert no_probes.notes == ["no memory probes: memory analysis skipped"]
    assert no_probes.gpt["linear_diverged"] is True
    frame = probes(probe("gpt-124m", "ref", 124_439_808, 4.0, 8.0, 4.0))
    no_arms = analyze_job(job_data(frame, pl.DataFrame(schema=RUN_SCHEMA), {}), exp)
    assert no_arms.gpt == {}
    assert no_arms.notes == ["no training arms: training analysis skipped"]
    assert no_arms.mem["rows"][0]["bpp_total"] == 16.0
    nothing = analyze_job(job_data(probes(), pl.DataFrame(schema=RUN_SCHEMA), {}), exp)
    assert (nothing.mem, nothing.gpt, nothing.verdicts) == ({}, {}, [])
    assert len(nothing.notes) == 2


def test_notes_name_each_missing_arm(
    sample_arms: tuple[Path, pl.DataFrame, dict], exp: Expectations
) -> None:
    _, runs, curves = sample_arms
    runs = runs.filter(~pl.col("arm").is_in(["ref_s1", "linear_s0"]))
    result = analyze_job(job_data(probes(), runs, curves), exp)
    assert result.notes == [
        "no memory probes: memory analysis skipped",
        "arm ref_s1 missing: seed-noise check not possible",
        "arm linear_s0 missing: divergence check not possible",
    ]
    assert find(result.verdicts, "diverged", "linear_s0").status == NA


def test_to_json_writes_null_for_nan_and_inf() -> None:
    text = to_json({"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": {"d": None}})
    assert json.loads(text) == {"a": None, "b": [None, None, 1.5], "c": {"d": None}}
    assert "NaN" not in text and "Infinity" not in text
    assert text.startswith('{\n  "a": null')
    verdict = Verdict("bpp_state", "gpt-30m/ref", math.nan, 8.0, 0.05, FAIL, "x")
    assert json.loads(to_json([verdict]))[0]["measured"] is None


# -- expectations ---------------------------------------------------------------------


def test_packaged_expectations_load(exp: Expectations) -> None:
    assert exp.memory.bpp_tolerance == 0.05
    assert exp.memory.extrapolate_params == 8_030_261_248
    assert list(exp.memory.expected_bpp) == ["ref", "flash", "flash_gr", "split_only", "quant_only"]
    assert exp.memory.expected_bpp["split_only"].state is None
    assert exp.memory.table4.rows["quant_only"].optim == 15.9
    assert exp.memory.gpt2_124m.model == "gpt-124m"
    assert (exp.training.baseline, exp.training.seed_twin) == ("ref_s0", "ref_s1")
    assert dict(exp.training.val_loss.model_extra or {}) == {"ref": 3.263, "flash": 3.265}
    assert "packaged" in exp.source
    with pytest.raises(ValidationError, match="frozen"):
        exp.memory.bpp_tolerance = 1.0  # type: ignore[misc]


GATE_KEYS = 'configuration = ["optimizer", "dataset", "steps"]'


def packaged_text() -> str:
    return (REPO / "tracker" / "studies" / "flashoptim.toml").read_text()


def test_custom_file_changes_a_tolerance_and_flips_a_verdict(
    tmp_path: Path, exp: Expectations
) -> None:
    frame = probes(probe("gpt-30m", "flash", 30_339_456, 2.015, 3.21, 2.013))
    before = find(memory_verdicts(frame, exp), "bpp_state", "gpt-30m/flash")
    assert before.status == FAIL
    text = packaged_text()
    assert "bpp_tolerance = 0.05 " in text
    custom = tmp_path / "loose.toml"
    custom.write_text(text.replace("bpp_tolerance = 0.05 ", "bpp_tolerance = 0.1 "))
    loose = load_expectations(custom)
    assert loose.memory.bpp_tolerance == 0.1 and loose.source == str(custom)
    after = find(memory_verdicts(frame, loose), "bpp_state", "gpt-30m/flash")
    assert (after.status, after.tolerance) == (PASS, 0.1)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda t: t.replace("[memory]", "[memory", 1), "invalid TOML: "),
        (lambda t: t.replace("bpp_tolerance = 0.05", "", 1), "missing key memory.bpp_tolerance"),
        (
            lambda t: t.replace("bpp_tolerance = 0.05", 'bpp_tolerance = "tight"', 1),
            "memory.bpp_tolerance must be a number, got 'tight'",
        ),
        (
            lambda t: t.replace("bpp_tolerance = 0.05", "bpp_tolerence = 0.05", 1),
            "unknown key memory.bpp_tolerence",
        ),
        (
            lambda t: t.replace("noise_factor = 1.0", "noise_factor = -1.0", 1),
            "training.noise_factor must be >= 0, got -1.0",
        ),
        (
            lambda t: t.replace("ref = { params = 29.9, optim = 59.8 }", "ref = 29.9", 1),
            "memory.table4.ref must be a table, got 29.9",
        ),
        (lambda t: t.split("[gate]")[0], "missing table [gate]"),
        (
            lambda t: t.replace('baseline = "ref_s0"', "baseline = 0", 1),
            "training.baseline must be a non-empty string, got 0",
        ),
        (
            lambda t: t.replace(GATE_KEYS, 'configuration = "optimizer"', 1),
            "gate.configuration must be a list of metadata keys, got 'optimizer'",
        ),
        (
            lambda t: t.replace(GATE_KEYS, 'configuration = ["steps", "steps"]', 1),
            "gate.configuration must not repeat a key, got ['steps', 'steps']",
        ),
        (
            lambda t: t.replace(GATE_KEYS, 'configuration = ["optimizer", ""]', 1),
            "gate.configuration must be a non-empty string, got ''",
        ),
        (lambda t: t.replace(GATE_KEYS, "", 1), "missing key gate.configuration"),
        (
            lambda t: t.replace('kind = "equivalence"', 'kind = "equivalance"', 1),
            "claims #2: unknown claim kind 'equivalance'; the known kinds: memory, equivalence, "
            "noninferiority, threshold, tracks_seed_noise, diverges; did you mean equivalence?",
        ),
        (
            lambda t: t.replace("\nmargin = 0.01\n", "\n", 1),
            "claims #2 (equivalence): missing key margin",
        ),
        (
            lambda t: t.replace("min_share = 0.25", "min_share = 1.5", 1),
            "claims #3 (tracks_seed_noise): min_share must be in (0, 1), got 1.5",
        ),
        (
            lambda t: t.replace("min_share = 0.25", "min_shares = 0.25", 1),
            "claims #3 (tracks_seed_noise): unknown key min_shares; did you mean min_share?",
        ),
        (
            lambda t: t.replace('design = "anytime"', 'design = "fixd"', 1),
            "claims #2 (equivalence): design must be 'anytime' or 'fixed', got 'fixd'",
        ),
        (
            lambda t: t.replace('lengths = "matched"', 'lengths = "mine"', 1),
            "claims #2 (equivalence): lengths must be 'matched' or 'own', got 'mine'",
        ),
        (
            lambda t: t.replace('kind = "diverges"', "", 1),
            "claims #4: missing key kind (one of memory, equivalence, noninferiority, "
            "threshold, tracks_seed_noise, diverges)",
        ),
        (
            lambda t: t.replace("false_alarm = 0.01", "false_alarm = 1.5", 1),
            "gate.false_alarm must be in (0, 1), got 1.5",
        ),
    ],
)
def test_broken_file_raises_bad_expectations(tmp_path: Path, edit: Any, problem: str) -> None:
    path = tmp_path / "broken.toml"
    text = packaged_text()
    path.write_text(edit(text))
    with pytest.raises(BadExpectations) as caught:
        load_expectations(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {problem}"), message


def test_missing_expectations_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.toml"
    with pytest.raises(BadExpectations, match=r"nowhere\.toml: no such file$"):
        load_expectations(path)
