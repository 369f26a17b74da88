"""The regression gate (`tracker compare --fail-on-regression`): not on noise, but closed.

Jobs drawn from the same distributions must never gate a pipeline; a shifted candidate, a
result gone missing, or a check turned N/A must.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from sqlalchemy import Engine, text

from tests.conftest import Cli
from tracker.jobdir.sample import write_sample_job

STEPS = 200
PAIRS = 20
# A candidate offset by this much tracks the baseline about as closely as a second seed does
# (EMA delta / seed-noise delta from 0.5 to 2.5 over these jobs): its per-job verdict is a
# coin flip, as the study's hidden jobs c1 and c2 showed.
COIN_FLIP = 0.004


def ingest(cli: Cli, root: Path, name: str, seed: int, **kwargs: object) -> None:
    cli("ingest", str(write_sample_job(root / name, seed=seed, steps=STEPS, **kwargs)))


def regressions(cli: Cli, a: str, b: str) -> tuple[int, list[str]]:
    result = cli("compare", a, b, "--fail-on-regression", ok=False)
    tail = result.stdout.split("\n\n")[-1].splitlines()
    return result.exit_code, tail


def test_same_distributions_never_regress_and_shifted_candidates_do(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    for seed in range(2 * PAIRS):
        ingest(cli, tmp_path, f"c{seed}", seed, flash_loss_shift=COIN_FLIP)
    kinds: set[str] = set()
    pairs = [(f"c{2 * i}", f"c{2 * i + 1}") for i in range(PAIRS)]
    for a, b in pairs + [(b, a) for a, b in pairs]:  # both ways: fixed turns into PASS -> FAIL
        code, tail = regressions(cli, a, b)
        assert code == 0, tail
        assert tail[0].startswith(f"0 regressions from {a} to {b} (0 regressed, ")
        rows = json.loads(cli("compare", a, b, "-f", "json").stdout)
        kinds |= {row["change"] for row in rows}
    assert "noise" in kinds  # a coin-flip PASS -> FAIL happened and was judged as noise

    ingest(cli, tmp_path, "val", 100, flash_val_loss_shift=0.1)
    code, tail = regressions(cli, "c0", "val")
    assert code == 3
    (line,) = [line for line in tail if line.startswith("  val_loss flash_s0")]
    assert re.fullmatch(
        r"  val_loss flash_s0: PASS -> FAIL \(delta \+0\.\d+\); seed noise: rise \+0\.\d+ "
        r"vs 0\.00\d+, the one-sided 99\.0% bound of a difference of two runs over 40 runs",
        line,
    ), line

    ingest(cli, tmp_path, "ema", 101, flash_loss_shift=0.03)
    for seed in range(2 * PAIRS):  # against a job whose candidate passed
        found = json.loads(cli("compare", f"c{seed}", "ema", "-f", "json").stdout)
        rows = {r["check"]: r for r in found}
        if rows["ema_delta_vs_seed_noise"]["status_a"] == "PASS":
            break
    ema = rows["ema_delta_vs_seed_noise"]
    assert ema["change"] == "regressed" and ema["rule"].startswith("seed noise: ")
    with engine.connect() as connection:
        pooled = connection.execute(
            text("SELECT avg(value) FROM job_number WHERE name = 'seed_noise'")
        ).scalar_one()
    assert ema["measured_b"] >= 5 * pooled  # five times the seed noise


def test_with_few_jobs_the_margins_decide(cli: Cli, tmp_path: Path) -> None:
    ingest(cli, tmp_path, "a", 2)  # seed 0's candidate fails tracking at 200 steps (2.3x)
    ingest(cli, tmp_path, "b", 1, flash_val_loss_shift=0.1)
    code, tail = regressions(cli, "a", "b")
    assert code == 3
    assert tail[0] == (
        "1 regression from a to b (1 regressed, 0 fixed, 0 new, 0 gone, 0 changed, 0 noise, "
        f"{len(json.loads(cli('compare', 'a', 'b', '-f', 'json').stdout)) - 1} same)"
    )
    assert re.fullmatch(
        r"  val_loss flash_s0: PASS -> FAIL \(delta \+0\.\d+\); margin: rise \+0\.\d+ "
        r"vs 0\.05 \(fewer than 5 runs to test against\)",
        tail[1],
    ), tail


def test_the_gate_fails_closed_on_results_gone_missing(cli: Cli, tmp_path: Path) -> None:
    ingest(cli, tmp_path, "full", 2)  # seed 0's candidate fails tracking at 200 steps
    partial = write_sample_job(
        tmp_path / "partial", seed=1, steps=STEPS, arms=("ref_s0", "ref_s1", "linear_s0")
    )
    sweep = partial / "mem_sweep.json"
    records = [r for r in json.loads(sweep.read_text()) if r["model"] != "gpt-124m"]
    sweep.write_text(json.dumps(records))
    cli("ingest", str(partial))
    code, tail = regressions(cli, "full", "partial")
    assert code == 3
    assert "  val_loss flash_s0: PASS -> gone; fail closed: PASS -> gone" in tail
    assert "  ema_delta_vs_seed_noise flash_s0: PASS -> N/A; fail closed: PASS -> N/A" in tail
    assert "  bpp_state gpt-124m/flash: PASS -> gone; fail closed: PASS -> gone" in tail
    rows = json.loads(cli("compare", "full", "partial", "-f", "json").stdout)
    gone = [r for r in rows if r["change"] == "gone"]
    assert all(r["status_a"] != "PASS" for r in gone)  # nothing that passed may just vanish
    regressed = sum(r["change"] == "regressed" for r in rows)
    assert tail[0].startswith(
        f"{regressed} regressions from full to partial ({regressed} regressed, 0 fixed, "
        f"0 new, {len(gone)} gone, "
    )
    assert len(tail) == 1 + regressed
