"""Values are checked like names: a model, variant, metadata value or --since that no job has
is an error naming the known values, never an empty answer; in the server a 422, never the
503 that monitoring reads as an outage. The claims table says what its interval is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.conftest import Cli

WHERE_KEYS = (  # what a --where key may name besides metadata
    "run columns: seed, val_loss, final_loss, diverged, steps, last_step, min_loss, last_loss, "
    "nonfinite, notes"
)

STEPS = 100
JOBS = {
    "v1": ({"seed": 0}, ["time=2026-10-01T00:00:00Z", "gpu=A10G", "flashoptim=0.1.0"]),
    "v2": ({"seed": 1}, ["time=2026-11-01T00:00:00Z", "gpu=H100", "flashoptim=0.1.1"]),
}
MODELS = "gpt-124m, gpt-30m, gpt-355m, gpt-82m, resnet50"
VARIANTS = "flash, flash_gr, linear, quant_only, ref, split_only"


CASES = [
    (
        ("query", "probes", "--model", "gpt2-124m"),
        f"no job has model gpt2-124m; known values: {MODELS}; did you mean gpt-124m?",
    ),
    (
        ("query", "probes", "--model", "GPT-124m"),
        f"no job has model GPT-124m; known values: {MODELS} (model gpt-124m differs only in case)",
    ),
    (
        ("query", "probes", "--variant", "flsh"),
        f"no job has variant flsh; known values: {VARIANTS}; did you mean flash?",
    ),
    (
        ("query", "runs", "--variant", "flsh"),
        f"no job has variant flsh; known values: {VARIANTS}; did you mean flash?",
    ),
    (
        ("query", "runs", "--where", "gpu=h100"),
        "no job has gpu=h100; known values: A10G, H100 (gpu=H100 differs only in case)",
    ),
    (
        ("query", "trend", "--metric", "val_loss", "--where", "gpu=h100"),
        "no job has gpu=h100; known values: A10G, H100 (gpu=H100 differs only in case)",
    ),
    (
        ("claims", "--where", "flashoptim=0.1"),
        "no job has flashoptim=0.1; known values: 0.1.0, 0.1.1",
    ),
    (
        ("report", "--where", "gpu=H100", "--since", "2027-01-01"),
        "no selected job is at or after 2027-01-01T00:00:00Z; the latest is "
        "2026-11-01T00:00:00Z (v2)",
    ),
    (
        ("report", "--where", "gpu=A10G", "--since", "2026-10-15"),
        "no selected job is at or after 2026-10-15T00:00:00Z; the latest is "
        "2026-10-01T00:00:00Z (v1)",
    ),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_a_value_no_job_has_is_an_error_naming_the_known_ones(
    study: Cli, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    extra = ("--out", str(tmp_path / "report")) if args[0] == "report" else ()
    result = study(*args, *extra, ok=False)
    assert (result.exit_code, result.stderr) == (1, f"Error: {message}\n")
    assert not (tmp_path / "report").exists()  # no empty report written


def test_values_that_match_still_answer(study: Cli, tmp_path: Path) -> None:
    rows = json.loads(study("query", "runs", "--where", "gpu=H100", "-f", "json").stdout)
    assert {row["job"] for row in rows} == {"v2"}
    rows = json.loads(study("query", "probes", "--variant", "flash", "-f", "json").stdout)
    assert {row["variant"] for row in rows} == {"flash"} and len(rows) == 10
    study("report", "--since", "2026-10-15", "--out", str(tmp_path / "r"))
    assert (tmp_path / "r" / "v2").is_dir() and not (tmp_path / "r" / "v1").exists()


def test_the_claims_table_names_its_intervals(study: Cli, tmp_path: Path) -> None:
    rows = json.loads(study("claims", "-f", "json").stdout)
    intervals = {row["claim"]: row["interval"] for row in rows}
    assert intervals["val_loss_equivalence"] == "90% CS"
    assert intervals["tracks_within_seed_noise"] == "95% CS"
    assert intervals["probe_failures"] == "95% binomial"
    assert intervals["bpp_state"] == "range"
    assert intervals["ablation_diverges"] == "range"
    study("report", "--out", str(tmp_path / "r"))
    index = (tmp_path / "r" / "index.html").read_text()
    assert '<span class="ci">[' in index and "95% CI" not in index
    assert "</span> (90% CS) from" in index


SERVER_CASES = [
    (
        "/api/claims?where=nosuch=1",
        f"no run column or metadata key 'nosuch'; {WHERE_KEYS}; metadata: flashoptim, gpu, time",
    ),
    ("/claims?group_by=nosuch", "Error: no job has metadata 'nosuch'; known keys: flashoptim"),
    (
        "/api/claims?where=gpu=h100",
        "no job has gpu=h100; known values: A10G, H100 (gpu=H100 differs only in case)",
    ),
    ("/api/trend?metric=val_loss&where=nosuch=1", "no run column or metadata key 'nosuch'; run "),
    (
        "/api/trend?metric=bpp_state&variant=flsh",
        f"no job has variant flsh; known values: {VARIANTS}",
    ),
    ("/trend?metric=bpp_state&model=gpt2-124m", "Error: no job has model gpt2-124m; known"),
]


@pytest.mark.parametrize(("path", "message"), SERVER_CASES, ids=[c[0] for c in SERVER_CASES])
def test_the_server_answers_unknown_keys_and_values_with_422(
    client: TestClient, path: str, message: str
) -> None:
    response = client.get(path)
    assert response.status_code == 422
    text = response.json()["detail"] if path.startswith("/api/") else response.text
    assert text.startswith(message) and text.count("\n") <= 1


def test_the_server_claims_carry_the_interval(client: TestClient) -> None:
    rows = client.get("/api/claims").json()
    assert {row["claim"]: row["interval"] for row in rows}["val_loss_equivalence"] == "90% CS"
    assert "</span> (95% binomial) from" in client.get("/claims").text
