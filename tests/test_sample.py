"""Tests of the deterministic sample-job generator (tracker.sample)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from tracker.sample import (
    DEFAULT_ARMS,
    DEMO_META,
    MODELS,
    SEED_JOB_ARMS,
    VARIANTS,
    write_demo_jobs,
    write_demo_seed_jobs,
    write_sample_job,
)

STEPS = 500


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _mem(directory: Path) -> list[dict]:
    records: list[dict] = json.loads((directory / "mem_sweep.json").read_text())
    return records


def _losses(path: Path) -> list[str]:
    with path.open(newline="") as fh:
        return [row["loss"] for row in csv.DictReader(fh)]


def test_same_arguments_give_byte_identical_files(tmp_path: Path) -> None:
    a = write_sample_job(tmp_path / "a", seed=3, steps=STEPS, flash_state_shift=0.25)
    b = write_sample_job(tmp_path / "b", seed=3, steps=STEPS, flash_state_shift=0.25)
    files_a, files_b = _files(a), _files(b)
    expected = {"mem_sweep.json"} | {
        f"{arm}.{ext}" for arm in DEFAULT_ARMS for ext in ("csv", "json")
    }
    assert set(files_a) == expected
    assert files_a == files_b


def test_different_seeds_give_different_files(tmp_path: Path) -> None:
    a = _files(write_sample_job(tmp_path / "a", seed=0, steps=STEPS))
    b = _files(write_sample_job(tmp_path / "b", seed=1, steps=STEPS))
    assert a["mem_sweep.json"] != b["mem_sweep.json"]
    assert a["ref_s0.csv"] != b["ref_s0.csv"]


def test_arm_content_does_not_depend_on_other_arms(tmp_path: Path) -> None:
    full = write_sample_job(tmp_path / "full", seed=2, steps=STEPS)
    only = write_sample_job(tmp_path / "only", seed=2, steps=STEPS, arms=("ref_s1",), probes=False)
    assert _files(only) == {n: b for n, b in _files(full).items() if n.startswith("ref_s1.")}


def test_mem_sweep_has_25_records_and_one_failure_by_default(tmp_path: Path) -> None:
    records = _mem(write_sample_job(tmp_path, steps=STEPS, arms=()))
    assert len(records) == len(MODELS) * len(VARIANTS) == 25
    assert {(r["model"], r["variant"]) for r in records} == {
        (m, v) for m in MODELS for v in VARIANTS
    }
    failures = [r for r in records if "n_params" not in r]
    assert len(failures) == 1
    assert failures[0]["model"] == "gpt-355m"
    assert failures[0]["variant"] == "ref"
    assert failures[0]["error"].startswith("CUDA out of memory")


def test_no_failure_when_failed_probe_is_none(tmp_path: Path) -> None:
    records = _mem(write_sample_job(tmp_path, steps=STEPS, arms=(), failed_probe=None))
    assert len(records) == 25
    assert all("n_params" in r for r in records)


def test_success_records_are_consistent_and_realistic(tmp_path: Path) -> None:
    records = _mem(write_sample_job(tmp_path, arms=(), failed_probe=None))
    analytic = {
        "ref": (4, 8, 4),
        "flash": (2, 3.125, 2),
        "flash_gr": (2, 3.125, 0),
        "split_only": (2, 4, 2),
        "quant_only": (4, 2.125, 4),
    }
    for r in records:
        n = r["n_params"]
        assert n == MODELS[r["model"]]
        assert r["bpp_params_state_grads"] == pytest.approx(
            r["bpp_params"] + r["bpp_state"] + r["bpp_grads"]
        )
        for key, exp in zip(("params", "state", "grads"), analytic[r["variant"]], strict=True):
            assert isinstance(r[f"{key}_bytes"], int)
            assert r[f"bpp_{key}"] == pytest.approx(r[f"{key}_bytes"] / n, abs=1e-6)
            assert exp <= r[f"bpp_{key}"] < exp + 0.25
        total_bytes = r["params_bytes"] + r["state_bytes"] + r["grads_bytes"]
        assert isinstance(r["peak_steady"], int)
        assert r["peak_steady"] > total_bytes
        assert isinstance(r["torch_version"], str)
        assert isinstance(r["flashoptim_version"], str)
    # the overhead over the analytic figure shrinks with model size
    by_model = {r["model"]: r for r in records if r["variant"] == "flash"}
    small = by_model["gpt-30m"]["bpp_params_state_grads"] - 7.125
    large = by_model["gpt-355m"]["bpp_params_state_grads"] - 7.125
    assert small > 0.05
    assert 0 < large < 0.03


def test_flash_state_shift_raises_flash_state_only(tmp_path: Path) -> None:
    base = _mem(write_sample_job(tmp_path / "base", seed=7, arms=()))
    shifted = _mem(write_sample_job(tmp_path / "shift", seed=7, arms=(), flash_state_shift=0.5))
    assert len(base) == len(shifted)
    n_flash = 0
    for b, s in zip(base, shifted, strict=True):
        assert (b["model"], b["variant"]) == (s["model"], s["variant"])
        if "n_params" not in b:
            assert b == s
            continue
        if b["variant"] == "flash":
            n_flash += 1
            assert s["bpp_state"] - b["bpp_state"] == pytest.approx(0.5)
            assert s["bpp_params_state_grads"] - b["bpp_params_state_grads"] == pytest.approx(0.5)
            assert s["bpp_params"] == b["bpp_params"]
            assert s["bpp_grads"] == b["bpp_grads"]
        else:
            assert s["bpp_state"] == b["bpp_state"]
            assert s["bpp_params_state_grads"] == b["bpp_params_state_grads"]
    assert n_flash == len(MODELS)


def test_training_arm_csv_layout(tmp_path: Path) -> None:
    job = write_sample_job(tmp_path, steps=STEPS, probes=False)
    assert not (job / "mem_sweep.json").exists()
    with (job / "ref_s0.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["step", "loss", "lr", "step_ms"]
    assert [int(r["step"]) for r in rows] == list(range(STEPS))
    losses = [float(r["loss"]) for r in rows]
    assert 10.0 < losses[0] < 11.5
    assert 3.0 < sum(losses[-10:]) / 10 < 3.6
    assert all(math.isfinite(x) for x in losses)
    summary = json.loads((job / "ref_s0.json").read_text())
    assert summary["diverged"] is False
    assert summary["steps"] == STEPS
    assert summary["seed"] == 0
    assert summary["model"] == "gpt-124m"
    assert summary["val_loss"] == pytest.approx(3.263, abs=0.01)
    assert summary["final_loss"] == pytest.approx(sum(losses[-5:]) / 5, abs=1e-4)


def test_linear_arm_diverges_with_inf_then_nan(tmp_path: Path) -> None:
    job = write_sample_job(tmp_path, steps=STEPS, arms=("linear_s0",), probes=False)
    losses = _losses(job / "linear_s0.csv")
    assert len(losses) == STEPS
    assert "inf" in losses
    assert "nan" in losses
    assert "NaN" not in losses
    first_inf, first_nan = losses.index("inf"), losses.index("nan")
    assert first_inf < first_nan
    assert all(x == "nan" for x in losses[first_nan:])
    assert all(math.isfinite(float(x)) for x in losses[: int(0.38 * STEPS)])
    text = (job / "linear_s0.json").read_text()
    assert "NaN" in text
    summary = json.loads(text)
    assert summary["diverged"] is True
    assert summary["val_loss"] is None
    assert math.isnan(summary["final_loss"])


def test_invalid_arm_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_sample_job(tmp_path, arms=("adamw_seed0",))
    with pytest.raises(ValueError):
        write_sample_job(tmp_path, arms=("sgd_s0",))


def test_write_demo_jobs(tmp_path: Path) -> None:
    jobs = write_demo_jobs(tmp_path, steps=200)
    assert [j.name for j in jobs] == ["job1", "job2", "job3"]
    assert sum("n_params" not in r for r in _mem(jobs[0])) == 1
    assert all("n_params" in r for r in _mem(jobs[1]))
    assert not (jobs[2] / "linear_s0.csv").exists()
    assert (jobs[2] / "ref_s1.csv").exists()
    flash2 = {r["model"]: r["bpp_state"] for r in _mem(jobs[1]) if r["variant"] == "flash"}
    flash3 = {r["model"]: r["bpp_state"] for r in _mem(jobs[2]) if r["variant"] == "flash"}
    assert all(flash3[m] > flash2[m] + 0.4 for m in MODELS)


def test_write_demo_seed_jobs(tmp_path: Path) -> None:
    jobs = write_demo_seed_jobs(tmp_path, steps=50)
    assert [j.name for j in jobs] == ["job4", "job5", "job6"]
    for job in jobs:
        assert sorted(p.stem for p in job.glob("*.csv")) == sorted(SEED_JOB_ARMS)
        assert all("n_params" in r for r in _mem(job))
    assert set(DEMO_META) == {f"job{n}" for n in range(1, 7)}
