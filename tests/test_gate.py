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
from tracker.jobdir.sample import SEED_JOB_ARMS, write_sample_job

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


def gone_rows(cli: Cli, a: str, b: str) -> list[tuple[str, str, str | None]]:
    rows = json.loads(cli("compare", a, b, "-f", "json").stdout)
    return [(r["check"], r["subject"], r["rule"]) for r in rows if r["change"] == "gone"]


def test_same_distributions_never_regress_and_shifted_candidates_do(
    cli: Cli, engine: Engine, tmp_path: Path
) -> None:
    for seed in range(2 * PAIRS):  # probes jittered by the generator, losses a coin flip
        ingest(cli, tmp_path, f"c{seed}", seed, flash_loss_shift=COIN_FLIP)
    kinds: set[str] = set()
    rules: set[str] = set()
    pairs = [(f"c{2 * i}", f"c{2 * i + 1}") for i in range(PAIRS)]
    clean = 0
    for a, b in pairs + [(b, a) for a, b in pairs]:  # both ways: fixed turns into PASS -> FAIL
        code, tail = regressions(cli, a, b)
        assert code == 0, tail
        assert tail[0].startswith(f"0 regressions from {a} to {b} (0 regressed, ")
        clean += 1
        rows = json.loads(cli("compare", a, b, "-f", "json").stdout)
        kinds |= {row["change"] for row in rows}
        rules |= {row["rule"].split(":")[0] for row in rows if row["rule"]}
    assert clean == 2 * PAIRS
    assert "noise" in kinds  # a coin-flip PASS -> FAIL happened and was judged as noise
    # every numeric check was judged against the 38 other jobs, deterministic ones included
    assert "spread of 38 other jobs" in rules and not any(r.startswith("floor") for r in rules)

    ingest(cli, tmp_path, "val", 100, flash_val_loss_shift=0.1)
    code, tail = regressions(cli, "c0", "val")
    assert code == 3
    assert tail == [
        "1 regression from c0 to val (1 regressed, 1 fixed, 0 new, 0 gone, 0 changed, 0 noise, "
        "93 same)",
        # val_loss: flash_s0 minus the mean of the job's ref seeds
        "  val_loss flash_s0: PASS -> FAIL (delta +0.09995); spread of 39 other jobs: rise "
        "+0.09995 vs 5 sd = 0.003711, their max 0.003355",
    ]

    ingest(cli, tmp_path, "bpp", 101, flash_state_shift=0.5)
    code, tail = regressions(cli, "c0", "bpp")
    assert code == 3
    assert tail[0] == (
        "7 regressions from c0 to bpp (7 regressed, 1 fixed, 0 new, 0 gone, 0 changed, "
        "0 noise, 87 same)"
    )
    assert (
        "  bpp_state gpt-124m/flash: PASS -> FAIL (delta +0.4983); spread of 40 other jobs: "
        "rise +0.4983 vs 5 sd = 0.01103, their max 3.15368"
    ) in tail
    assert (  # a deterministic check without a floor, judged by the spread all the same
        "  table4_optim_gib flash: PASS -> FAIL (delta +3.726); spread of 40 other jobs: "
        "rise +3.726 vs 5 sd = 0.03294, their max 23.469"
    ) in tail

    ingest(cli, tmp_path, "lost", 102, arms=("ref_s0", "ref_s1", "linear_s0"))
    code, tail = regressions(cli, "c0", "lost")
    assert code == 3
    assert tail == [
        "1 regression from c0 to lost (1 regressed, 0 fixed, 0 new, 2 gone, 0 changed, "
        "0 noise, 92 same)",
        "  val_loss flash_s0: PASS -> gone; fail closed: PASS -> gone, no flash arm left",
    ]
    # c0's tracking had failed: a FAIL that can no longer be judged is gone, not regressed
    assert ("ema_delta_vs_seed_noise", "flash_s0", "FAIL -> N/A: no flash arm left") in gone_rows(
        cli, "c0", "lost"
    )

    ingest(cli, tmp_path, "ema", 103, flash_loss_shift=0.03)
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


def test_with_few_jobs_the_floors_decide(cli: Cli, tmp_path: Path) -> None:
    ingest(cli, tmp_path, "a", 2)  # seed 0\'s candidate fails tracking at 200 steps (2.3x)
    ingest(cli, tmp_path, "b", 1, flash_val_loss_shift=0.1)
    code, tail = regressions(cli, "a", "b")
    assert code == 3
    assert tail == [
        "1 regression from a to b (1 regressed, 0 fixed, 0 new, 0 gone, 0 changed, 0 noise, "
        "94 same)",
        "  val_loss flash_s0: PASS -> FAIL (delta +0.1013); floor 0.05 nats (0 other jobs): "
        "rise +0.1013",
    ]
    ingest(cli, tmp_path, "c", 2, flash_state_shift=0.5)
    code, tail = regressions(cli, "a", "c")
    assert code == 3
    assert tail[0] == (
        "7 regressions from a to c (7 regressed, 0 fixed, 0 new, 0 gone, 0 changed, "
        "0 noise, 88 same)"
    )
    assert (
        "  bpp_state gpt-124m/flash: PASS -> FAIL (delta +0.5); floor 0.1 B/param "
        "(1 other job): rise +0.5"
    ) in tail
    # checks without a floor fall back to their status
    assert "  table4_optim_gib flash: PASS -> FAIL (delta +3.739); status: PASS -> FAIL" in tail
    rows = json.loads(cli("compare", "a", "b", "-f", "json").stdout)
    rules = {(r["check"], r["subject"]): r["rule"] for r in rows}
    assert rules["bpp_state", "gpt-124m/ref"].startswith("floor 0.1 B/param (1 other job): rise ")
    assert rules["table4_optim_gib", "ref"] is None  # no floor, no flip: nothing decided

    # a design that needs less memory fails the analytic check but is no loss: changed, exit 0
    ingest(cli, tmp_path, "d", 3, flash_state_shift=-0.5)
    code, tail = regressions(cli, "a", "d")
    assert code == 0, tail
    rows = json.loads(cli("compare", "a", "d", "-f", "json").stdout)
    state = next(r for r in rows if (r["check"], r["subject"]) == ("bpp_state", "gpt-124m/flash"))
    assert (state["status_a"], state["status_b"], state["change"]) == ("PASS", "FAIL", "changed")
    # -0.5 planted, plus the probes' jitter
    assert re.fullmatch(r"floor 0\.1 B/param \(2 other jobs\): rise -0\.(49\d*|5)", state["rule"])
    table4 = next(r for r in rows if (r["check"], r["subject"]) == ("table4_optim_gib", "flash"))
    assert (table4["change"], table4["rule"]) == (
        "changed",
        "status: PASS -> FAIL on a value that fell",
    )


def test_fewer_seeds_are_gone_not_regressed(cli: Cli, tmp_path: Path) -> None:
    ingest(cli, tmp_path, "two", 5, arms=SEED_JOB_ARMS)
    ingest(cli, tmp_path, "one", 6, arms=[a for a in SEED_JOB_ARMS if a != "flash_s1"])
    code, tail = regressions(cli, "two", "one")
    assert code == 0
    assert tail == [
        "0 regressions from two to one (0 regressed, 0 fixed, 0 new, 2 gone, 0 changed, "
        "0 noise, 95 same)"
    ]
    assert gone_rows(cli, "two", "one") == [
        ("val_loss", "flash_s1", "PASS -> gone: flash still has arms"),
        ("val_loss_paper", "flash_s1", "N/A -> gone: flash still has arms"),
    ]


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
    assert "  val_loss flash_s0: PASS -> gone; fail closed: PASS -> gone, no flash arm left" in tail
    assert (
        "  ema_delta_vs_seed_noise flash_s0: PASS -> N/A; fail closed: PASS -> N/A, "
        "no flash arm left"
    ) in tail
    assert (
        "  bpp_state gpt-124m/flash: PASS -> gone; fail closed: PASS -> gone, "
        "probe gpt-124m/flash gone"
    ) in tail
    rows = json.loads(cli("compare", "full", "partial", "-f", "json").stdout)
    gone = [r for r in rows if r["change"] == "gone"]
    assert all(r["status_a"] != "PASS" for r in gone)  # nothing that passed may just vanish
    regressed = sum(r["change"] == "regressed" for r in rows)
    assert tail[0].startswith(
        f"{regressed} regressions from full to partial ({regressed} regressed, 0 fixed, "
        f"0 new, {len(gone)} gone, "
    )
    assert len(tail) == 1 + regressed
