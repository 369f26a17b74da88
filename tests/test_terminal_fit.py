"""``tracker compare`` and ``tracker claims`` fit the terminal: every line within COLUMNS
(each line whole when stdout is no terminal and COLUMNS is unset), names wrapped only after a
space, ``_`` or ``/``, numbers never cut (what does not fit follows its row), CSV and JSON
untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tracker.cli import app
from tracker.cli.fit import fitted_table, wrap
from tracker.row_formats import Format, render


@pytest.fixture
def demo(cli: Cli, tmp_path: Path) -> Cli:
    cli("demo", "--steps", "60", "--dir", str(tmp_path / "jobs"), "--out", str(tmp_path / "r"))
    return cli


def run(cli: Cli, columns: int | None, *args: str) -> str:
    env = {"COLUMNS": str(columns) if columns else None}  # None: unset
    result = cli.runner.invoke(app, ["--db", cli.url, *args], env=env)
    assert result.exit_code == 0, result.output
    return str(result.stdout)


def test_compare_and_claims_fit_80_columns(demo: Cli) -> None:
    for args in (("compare", "job1", "job3"), ("claims",)):
        for columns in (80, 100):
            text = run(demo, columns, *args)
            assert max(map(len, text.splitlines())) <= columns, (args, columns)
        wide = run(demo, 400, *args).splitlines()
        assert max(map(len, wide)) > 100  # what there was to fit
        assert max(map(len, run(demo, None, *args).splitlines())) > 100  # a pipe: lines whole


def test_a_narrow_comparison_keeps_every_number(demo: Cli) -> None:
    rows = json.loads(run(demo, 80, "compare", "job1", "job3", "-f", "json"))
    text = run(demo, 80, "compare", "job1", "job3")
    lines = text.splitlines()
    assert lines[0].split() == ["check", "subject", "status_a", "status_b", "delta", "change"]
    flash = next(r for r in rows if (r["check"], r["subject"]) == ("bpp_state", "gpt-124m/flash"))
    at = next(i for i, line in enumerate(lines) if line.startswith("bpp_state   ") and
              "gpt-124m/flash" in line)  # fmt: skip
    assert lines[at].split() == [
        "bpp_state", "gpt-124m/flash", "PASS", "FAIL", f"{flash['delta']:.6g}", "regressed",
    ]  # fmt: skip
    follow = " ".join(line.strip() for line in lines[at + 1 : at + 5])
    assert follow.startswith(
        f"measured_a {flash['measured_a']:.6g}; measured_b {flash['measured_b']:.6g}; "
        f"expected {flash['expected']:.6g}; tolerance {flash['tolerance']:.6g}; rule "
    )
    regressions = [line for line in lines if line.startswith("  bpp_state gpt-124m/flash: ")]
    first = f"  bpp_state gpt-124m/flash: PASS -> FAIL (delta +{flash['delta']:.4g});"
    assert regressions == [f"{first} 4 comparable jobs"]


def test_csv_and_json_ignore_the_width(demo: Cli) -> None:
    for args in (("compare", "job1", "job3"), ("claims",)):
        for fmt in ("csv", "json"):
            assert run(demo, 40, *args, "-f", fmt) == run(demo, 400, *args, "-f", fmt)


def test_wrap_breaks_after_spaces_underscores_and_slashes_only() -> None:
    assert wrap("ema_delta_vs_seed_noise", 10) == ["ema_delta_", "vs_seed_", "noise"]
    assert wrap("gpt-124m/flash_gr", 9) == ["gpt-124m/", "flash_gr"]
    assert wrap("4.024 (range 4.019..4.03)", 8) == ["4.024", "(range", "4.019..4.03)"]
    assert wrap("", 5) == [""]


def test_a_table_that_fits_is_the_plain_table() -> None:
    rows = [{"a": "x", "b": 1.5}, {"a": "long name", "b": None}]
    cells = [["x", "1.5"], ["long name", ""]]
    plain = render(rows, Format.table).splitlines()
    assert fitted_table(cells, ["a", "b"], 80, wrapped=("a",)) == plain
    assert fitted_table(cells, ["a", "b"], 8, wrapped=("a",)) == [
        "a     b", "----  ---", "x     1.5", "long", "name",
    ]  # fmt: skip
