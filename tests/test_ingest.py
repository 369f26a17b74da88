"""Ingest through the real CLI and library against real, migrated databases."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from tests.conftest import Cli
from tests.stored import row_counts
from tracker.models import Curve, CurveChunk, Job, JobMeta, Probe, Run, SourceFile
from tracker.sample import write_sample_job
from tracker.services.ingest import ingest_job
from tracker.store.curves import find_curve, load_curves
from tracker.store.transactions import write_session

STEPS = 200


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    return write_sample_job(tmp_path / "job2", steps=STEPS)


def counts(engine: Engine) -> dict[str, int]:
    with Session(engine) as session:
        return row_counts(session, (Job, JobMeta, SourceFile, Probe, Run, Curve, CurveChunk))


def test_ingest_stores_everything_and_says_so(cli: Cli, job_dir: Path, engine: Engine) -> None:
    result = cli("ingest", str(job_dir), "--meta", "gpu=A10G", "--meta", "flashoptim=0.1.4")
    assert result.stdout == "job2: ingested 25 probes (1 failed), 4 arms, 2400 points\n"
    assert counts(engine) == {
        "job": 1,
        "job_meta": 2,
        "source_file": 9,
        "probe": 25,
        "run": 4,
        "curve": 12,  # loss, lr, step_ms per arm
        "curve_chunk": 12,  # a chunk holds up to 16,384 points
        "point": 4 * 3 * STEPS,
    }
    with Session(engine) as session:
        failed = session.scalars(select(Probe).where(Probe.n_params.is_(None))).one()
        assert (failed.model, failed.variant) == ("gpt-355m", "ref")
        assert failed.error is not None and failed.error.startswith("CUDA out of memory")
        probe = session.scalars(
            select(Probe).where(Probe.model == "gpt-124m", Probe.variant == "flash")
        ).one()
        record = next(
            r
            for r in json.loads((job_dir / "mem_sweep.json").read_text())
            if (r["model"], r["variant"]) == ("gpt-124m", "flash")
        )
        assert probe.bpp_state == record["bpp_state"]
        assert probe.peak_steady == record["peak_steady"]
        assert probe.extra["state_bytes"] == record["state_bytes"]  # unknown keys kept
        run = session.scalars(select(Run).where(Run.arm == "flash_s0")).one()
        assert (run.model, run.variant, run.seed) == ("gpt-124m", "flash", 0)
        summary = json.loads((job_dir / "flash_s0.json").read_text())
        assert run.val_loss == summary["val_loss"]
        assert run.extra["wall_time_s"] == summary["wall_time_s"]
        files = {f.path: f.size for f in session.scalars(select(SourceFile))}
        assert files["ref_s0.csv"] == (job_dir / "ref_s0.csv").stat().st_size


def test_curves_round_trip_nan_and_inf_exactly(cli: Cli, job_dir: Path, engine: Engine) -> None:
    (job_dir / "ref_s0.csv").write_text(
        "step,loss\n0,10.5\n1,nan\n2,inf\n3,-inf\n4,3.25\n5,1e-300\n"
    )
    summary = json.loads((job_dir / "ref_s0.json").read_text())
    summary.update(val_loss=float("nan"), final_loss=None)
    (job_dir / "ref_s0.json").write_text(json.dumps(summary))
    cli("ingest", str(job_dir))
    with Session(engine) as session:
        curve = load_curves(session, [find_curve(session, "job2", "ref_s0", "loss").id]).drop(
            "curve_id"
        )
        run = session.scalars(select(Run).where(Run.arm == "ref_s0")).one()
        row = session.scalars(
            select(Curve).where(Curve.metric == "loss", Curve.run_id == run.id)
        ).one()
    assert curve["step"].to_list() == [0, 1, 2, 3, 4, 5]
    values = curve["value"].to_list()
    assert values[0] == 10.5 and math.isnan(values[1])
    assert values[2:] == [math.inf, -math.inf, 3.25, 1e-300]
    assert run.val_loss is not None and math.isnan(run.val_loss)
    assert run.final_loss is None  # null stays null, NaN stays NaN
    assert row.min_value == 1e-300 and row.max_value == 10.5


def test_diverged_arm_keeps_its_non_finite_values(cli: Cli, job_dir: Path, engine: Engine) -> None:
    cli("ingest", str(job_dir))
    with Session(engine) as session:
        curve = load_curves(session, [find_curve(session, "job2", "linear_s0", "loss").id]).drop(
            "curve_id"
        )
    raw = [line.split(",")[1] for line in (job_dir / "linear_s0.csv").read_text().splitlines()[1:]]
    assert raw.count("inf") > 0 and raw.count("nan") > 0
    stored = curve["value"].to_list()
    assert sum(math.isinf(v) for v in stored) == raw.count("inf")
    assert sum(math.isnan(v) for v in stored) == raw.count("nan")


def test_reingesting_identical_content_is_a_no_op(cli: Cli, job_dir: Path, engine: Engine) -> None:
    cli("ingest", str(job_dir))
    before = counts(engine)
    again = cli("ingest", str(job_dir))
    assert again.stdout == "job2: unchanged, already ingested with identical content\n"
    assert counts(engine) == before


def test_same_name_different_content_is_refused_unless_replace(
    cli: Cli, job_dir: Path, tmp_path: Path, engine: Engine
) -> None:
    cli("ingest", str(job_dir))
    other = write_sample_job(tmp_path / "elsewhere" / "job2", seed=7, steps=50)
    refused = cli("ingest", str(other), ok=False)
    assert refused.exit_code == 1
    assert refused.stderr == (
        f"Error: {other}: job 'job2' already exists with different content; "
        "use --replace to swap it\n"
    )
    assert counts(engine)["point"] == 4 * 3 * STEPS
    replaced = cli("ingest", str(other), "--replace")
    assert replaced.stdout == "job2: replaced 25 probes (1 failed), 4 arms, 600 points\n"
    assert counts(engine)["point"] == 4 * 3 * 50
    assert counts(engine)["job"] == 1


def test_replace_keeps_the_stored_metadata_under_the_new_values(
    cli: Cli, job_dir: Path, tmp_path: Path
) -> None:
    cli("ingest", str(job_dir), "--meta", "gpu=A100", "--meta", "time=2026-11-28T10:00Z")
    other = write_sample_job(tmp_path / "elsewhere" / "job2", seed=7, steps=50)
    replaced = cli("ingest", str(other), "--replace", "--meta", "gpu=H100", "--meta", "run=2")
    assert replaced.stdout == (
        "job2: replaced 25 probes (1 failed), 4 arms, 600 points; "
        "metadata kept: time=2026-11-28T10:00:00Z\n"
    )
    assert cli("meta", "job2").stdout == "job2: gpu=H100 run=2 time=2026-11-28T10:00:00Z\n"


def test_replace_keeps_the_old_job_when_the_new_content_is_broken(
    cli: Cli, job_dir: Path, tmp_path: Path, engine: Engine
) -> None:
    cli("ingest", str(job_dir))
    before = counts(engine)
    other = write_sample_job(tmp_path / "elsewhere" / "job2", seed=7, steps=50)
    (other / "ref_s1.csv").write_text("step,loss\n0,1.0\n1,oops\n")
    result = cli("ingest", str(other), "--replace", ok=False)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {other}: ref_s1.csv line 3: loss 'oops' is not a number\n"
    assert counts(engine) == before


def test_an_error_in_the_last_file_read_leaves_no_trace(
    cli: Cli, job_dir: Path, engine: Engine
) -> None:
    # arms are read in name order; ref_s1 comes last
    (job_dir / "ref_s1.csv").write_text("step,loss\n0,1.0\n1,oops\n")
    result = cli("ingest", str(job_dir), ok=False)
    assert result.exit_code == 1
    assert result.stderr == f"Error: {job_dir}: ref_s1.csv line 3: loss 'oops' is not a number\n"
    assert all(n == 0 for n in counts(engine).values())


def test_seed_comes_from_the_file_name_and_must_agree(cli: Cli, job_dir: Path) -> None:
    summary = json.loads((job_dir / "ref_s1.json").read_text())
    (job_dir / "ref_s1.json").write_text(json.dumps({**summary, "seed": 3}))
    result = cli("ingest", str(job_dir), ok=False)
    assert result.stderr == (
        f"Error: {job_dir}: ref_s1.json: 'seed' is 3 but the file name says seed 1\n"
    )


def test_arm_model_defaults_and_can_be_overridden(cli: Cli, job_dir: Path, engine: Engine) -> None:
    for arm in ("ref_s0", "flash_s0", "ref_s1", "linear_s0"):
        summary = json.loads((job_dir / f"{arm}.json").read_text())
        summary.pop("model")
        (job_dir / f"{arm}.json").write_text(json.dumps(summary))
    cli("ingest", str(job_dir), "--arm-model", "gpt-355m")
    with Session(engine) as session:
        assert set(session.scalars(select(Run.model))) == {"gpt-355m"}


def test_probe_records_from_json_lines_and_duplicates_merged(
    cli: Cli, job_dir: Path, engine: Engine
) -> None:
    records = json.loads((job_dir / "mem_sweep.json").read_text())
    lines = "\n".join(json.dumps(r) for r in records[:5]) + "\n\n"
    (job_dir / "probe_stdout.jsonl").write_text(lines)
    cli("ingest", str(job_dir))
    assert counts(engine)["probe"] == 25
    assert counts(engine)["source_file"] == 10


def test_unknown_files_are_listed_as_skipped(cli: Cli, job_dir: Path) -> None:
    (job_dir / "notes.txt").write_text("hello")
    (job_dir / "mem_analysis.json").write_text("{}")
    (job_dir / "logs").mkdir()
    result = cli("ingest", str(job_dir))
    assert result.stdout.splitlines()[1] == "  skipped: logs/, mem_analysis.json, notes.txt"


def test_job_name_option_and_its_validation(cli: Cli, job_dir: Path) -> None:
    assert cli("ingest", str(job_dir), "--job", "job2-rerun.a_1").stdout.startswith(
        "job2-rerun.a_1: ingested"
    )
    bad = cli("ingest", str(job_dir), "--job", "../etc", ok=False)
    assert bad.exit_code == 1
    assert bad.stderr.startswith(f"Error: {job_dir}: invalid job name '../etc': use letters")


def test_several_directories_one_transaction_each(cli: Cli, tmp_path: Path, engine: Engine) -> None:
    first = write_sample_job(tmp_path / "a", steps=20)
    second = write_sample_job(tmp_path / "b", steps=20, seed=1)
    result = cli("ingest", str(first), str(second))
    assert result.stdout.splitlines() == [
        "a: ingested 25 probes (1 failed), 4 arms, 240 points",
        "b: ingested 25 probes (1 failed), 4 arms, 240 points",
        "2 directories: 2 ingested",
    ]
    assert counts(engine)["job"] == 2


def test_errors_name_the_directory_as_given(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_sample_job(tmp_path / "job", steps=5, arms=())
    cli("ingest", "job")
    write_sample_job(tmp_path / "job", seed=4, steps=5, arms=())
    result = cli("ingest", "job", ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: job: job 'job' already exists with different content; use --replace to swap it\n",
    )


def test_a_failing_directory_does_not_stop_the_others(
    cli: Cli, tmp_path: Path, engine: Engine
) -> None:
    bad = write_sample_job(tmp_path / "bada", steps=20)
    (bad / "ref_s0.csv").write_text("step,loss\n0,1.0\n1,oops\n")
    good = write_sample_job(tmp_path / "job6", steps=20, seed=1)
    again = write_sample_job(tmp_path / "job7", steps=20, seed=2)
    cli("ingest", str(again))
    missing = tmp_path / "nosuch"
    result = cli("ingest", str(bad), str(missing), str(good), str(again), ok=False)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "job6: ingested 25 probes (1 failed), 4 arms, 240 points",
        "job7: unchanged, already ingested with identical content",
        f"4 directories: 1 ingested, 1 unchanged, 2 failed ({bad}, {missing})",
    ]
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert errors == [
        f"Error: {bad}: ref_s0.csv line 3: loss 'oops' is not a number",
        f"Error: {missing}: no such directory",
    ]
    with Session(engine) as session:
        assert sorted(session.scalars(select(Job.name))) == ["job6", "job7"]


def test_library_ingest_in_callers_transaction_rolls_back(job_dir: Path, engine: Engine) -> None:
    with pytest.raises(RuntimeError), write_session(engine) as session, session.begin():
        ingest_job(session, job_dir)
        raise RuntimeError("caller changed its mind")
    assert counts(engine)["job"] == 0


def test_a_failed_probe_keeps_every_field_it_has(cli: Cli, job_dir: Path, engine: Engine) -> None:
    records = json.loads((job_dir / "mem_sweep.json").read_text())
    failed = next(r for r in records if "n_params" not in r)
    failed.update(peak_steady=123, bpp_params=4.5, stage="optimizer.step")
    (job_dir / "mem_sweep.json").write_text(json.dumps(records))
    cli("ingest", str(job_dir))
    with Session(engine) as session:
        probe = session.scalars(select(Probe).where(Probe.n_params.is_(None))).one()
    assert probe.extra == {"peak_steady": 123, "bpp_params": 4.5, "stage": "optimizer.step"}
    assert probe.peak_steady is None
