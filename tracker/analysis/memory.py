"""Memory probes: the study script's ``mem_analysis.json`` and bytes-per-parameter verdicts.

Per-row numbers (bytes/parameter, GiB, extrapolations) are polars expressions over the probe
frame; only the final scalars go through Python's ``round()``, which rounds the exact binary
value of a float and so matches the study script digit for digit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from tracker.analysis.checks import BPP, GPT2_124M, TABLE4, Check
from tracker.analysis.expectations import COMPONENTS, Expectations, PaperTable
from tracker.analysis.scaling import Row, fixed_overheads, scaling_by_size
from tracker.analysis.verdict import FAIL, KNOWN, NA, Verdict, within

__all__ = ["memory_analysis", "memory_parts", "memory_verdicts"]

# The columns of a probe frame (tracker.store.jobdata.PROBE_COLUMNS) and their types.
PROBE_SCHEMA: dict[str, Any] = {
    "model": pl.String,
    "variant": pl.String,
    "n_params": pl.Int64,
    "bpp_params": pl.Float64,
    "bpp_state": pl.Float64,
    "bpp_grads": pl.Float64,
    "bpp_params_state_grads": pl.Float64,
    "peak_steady": pl.Int64,
    "error": pl.String,
}
MEASURED = ("n_params", "bpp_params", "bpp_state", "bpp_grads", "bpp_params_state_grads")
# The study script reports its Table 4 extrapolation for these variants only; the verdicts
# cover every variant of the expectations' Table 4.
SCRIPT_TABLE4_VARIANTS = ("ref", "flash")


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _with_columns(frame: pl.DataFrame, schema: dict[str, Any]) -> pl.DataFrame:
    """``frame`` with every column of ``schema``; a missing one is all null."""
    missing = [pl.lit(None, dtype).alias(name) for name, dtype in schema.items()]
    return frame.with_columns(e for e in missing if e.meta.output_name() not in frame.columns)


def _successes(probes: pl.DataFrame, exp: Expectations) -> pl.DataFrame:
    """Successful probes in file order, with the derived per-row numbers."""
    mem = exp.memory
    frame = _with_columns(probes, PROBE_SCHEMA).select(
        pl.col(name).cast(dtype) for name, dtype in PROBE_SCHEMA.items()
    )
    n = pl.col("n_params")
    expected = {
        f"exp_{c}": pl.col("variant").replace_strict(
            {v: bpp.get(c) for v, bpp in mem.expected_bpp.items()},
            default=None,
            return_dtype=pl.Float64,
        )
        for c in COMPONENTS
    }
    return frame.filter(n.is_not_null()).with_columns(
        **expected,
        has_expectation=pl.col("variant").is_in(list(mem.expected_bpp)),
        peak_bpp=pl.col("peak_steady") / n,
        scaling=pl.col("model").str.starts_with(mem.scaling_model_prefix),
        # GiB of this very model, and extrapolated to the Table 4 model (same evaluation
        # order as the script: bpp * n / GiB)
        gib_params=pl.col("bpp_params") * n / mem.gib,
        gib_optim=pl.col("bpp_state") * n / mem.gib,
        x_params_gib=pl.col("bpp_params") * mem.extrapolate_params / mem.gib,
        x_optim_gib=pl.col("bpp_state") * mem.extrapolate_params / mem.gib,
        x_total_gib=pl.col("bpp_params_state_grads") * mem.extrapolate_params / mem.gib,
    )


def _failures(probes: pl.DataFrame) -> pl.DataFrame:
    frame = _with_columns(probes, {**PROBE_SCHEMA, "extra": pl.Object})
    return frame.filter(pl.col("n_params").is_null())


@dataclass(frozen=True)
class _Probes:
    """A job's probes as its analysis, verdicts and notes read them, derived once."""

    ok: pl.DataFrame  # ``_successes``
    rows: list[Row]  # ok's, in file order
    failed: list[Row]  # ``_failures``', in file order
    by_size: dict[str, list[Row]]  # ``scaling_by_size``

    @classmethod
    def of(cls, probes: pl.DataFrame, exp: Expectations) -> _Probes:
        ok = _successes(probes, exp)
        failed = list(_failures(probes).iter_rows(named=True))
        return cls(ok, list(ok.iter_rows(named=True)), failed, scaling_by_size(ok))

    def largest(self) -> dict[str, Row]:
        """Per variant, the probe of the largest scaling model (the script's ``vs[-1]``)."""
        return {variant: rows[-1] for variant, rows in self.by_size.items()}


def _failure_record(row: dict[str, Any]) -> dict[str, Any]:
    """The original failure record: model, variant, error and the unknown keys merged back."""
    record: dict[str, Any] = {"model": row["model"], "variant": row["variant"]}
    if row["error"] is not None:
        record["error"] = row["error"]
    for key in (*MEASURED[1:], "peak_steady"):
        if row[key] is not None:  # ingest keeps no measurement of a failed probe; just in case
            record[key] = row[key]
    record.update(row["extra"] or {})
    return record


def _first_line(error: str | None) -> str:
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return lines[0] if lines else "the probe failed without an error message"


def memory_parts(
    probes: pl.DataFrame, exp: Expectations
) -> tuple[dict[str, Any], list[Verdict], list[str]]:
    """``memory_analysis``, ``memory_verdicts`` and what the memory analysis could not do (for
    people), the probes' derived numbers made once for the three."""
    derived = _Probes.of(probes, exp)
    return _analysis(derived, exp), _verdicts(derived, exp), _notes(derived, exp)


def memory_analysis(probes: pl.DataFrame, exp: Expectations) -> dict[str, Any]:
    """Exactly what the study script writes to ``mem_analysis.json``.

    ``rows``: every successful probe in file order; ``verdicts``: per variant with at least
    two measured scaling-model sizes, bytes/param by size and the extrapolation of the largest
    to the Table 4 model; ``table4_extrapolation``: ``ref`` and ``flash`` (the script's keys);
    ``failed_probes``: the failure records as the job wrote them.
    """
    return _analysis(_Probes.of(probes, exp), exp)


def _analysis(probes: _Probes, exp: Expectations) -> dict[str, Any]:
    rows = [
        {
            "model": row["model"],
            "variant": row["variant"],
            "n": row["n_params"],
            "bpp_params": _r(row["bpp_params"], 3),
            "bpp_state": _r(row["bpp_state"], 3),
            "bpp_grads": _r(row["bpp_grads"], 3),
            "bpp_total": _r(row["bpp_params_state_grads"], 3),
            "exp_params": row["exp_params"],
            "exp_state": row["exp_state"],
            "exp_grads": row["exp_grads"],
            "peak_bpp": _r(row["peak_bpp"], 3),
        }
        for row in probes.rows
    ]
    return {
        "rows": rows,
        "verdicts": _scaling_verdicts(probes, exp),
        "table4_extrapolation": _script_table4(probes, exp),
        "failed_probes": [_failure_record(row) for row in probes.failed],
    }


def _scaling_verdicts(probes: _Probes, exp: Expectations) -> dict[str, Any]:
    """The script's ``verdicts``: per variant with at least two measured scaling-model sizes,
    bytes/param by size and the largest's extrapolation to the Table 4 model."""
    verdicts: dict[str, Any] = {}
    for variant in exp.memory.expected_bpp:
        sizes = probes.by_size.get(variant, [])
        if len(sizes) < 2:
            continue
        largest = sizes[-1]
        verdicts[variant] = {
            "bpp_by_size": {
                f"{row['n_params'] / 1e6:.0f}M": _r(row["bpp_params_state_grads"], 3)
                for row in sizes
            },
            "bpp_at_largest": _r(largest["bpp_params_state_grads"], 3),
            "extrapolated_8B_params_state_grads_gib": _r(largest["x_total_gib"], 1),
        }
    return verdicts


def _script_table4(probes: _Probes, exp: Expectations) -> dict[str, Any]:
    """The script's ``table4_extrapolation``: the largest scaling model's extrapolation of
    ``ref`` and ``flash`` beside the paper's Table 4."""
    largest_of = probes.largest()
    table4: dict[str, Any] = {}
    for variant in SCRIPT_TABLE4_VARIANTS:
        paper = exp.memory.table4.rows.get(variant)
        if paper is None or variant not in largest_of:
            continue
        row = largest_of[variant]
        table4[variant] = {
            "pred_params_gib": _r(row["x_params_gib"], 1),
            "paper_params": paper.params,
            "pred_optim_gib": _r(row["x_optim_gib"], 1),
            "paper_optim": paper.optim,
        }
    return table4


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _bpp_verdicts(probes: _Probes, exp: Expectations) -> list[Verdict]:
    """Measured bytes/param against the analytic value, allowing the fixed overhead the
    fit over the job's model sizes finds (it is reported, and the asymptote with it)."""
    tolerance = exp.memory.bpp_tolerance
    prefix = exp.memory.scaling_model_prefix
    overheads = fixed_overheads(probes.by_size)
    verdicts = []
    for row in probes.rows:
        subject = f"{row['model']}/{row['variant']}"
        for component in COMPONENTS:
            check = BPP[component]
            measured: float | None = row[check]
            expected: float | None = row[f"exp_{component}"]
            if not row["has_expectation"]:
                status, tol = NA, None
                detail = f"no expected bytes/param for variant {row['variant']!r}"
            elif expected is None:
                status, tol = NA, None
                detail = f"{row['variant']} {component}: no analytic bytes/param to check against"
            else:
                fit = overheads.get((row["variant"], component))
                allowance = fit.bytes / row["n_params"] if fit else 0.0
                tol = tolerance + allowance
                status = within(measured, expected, tol)
                detail = (
                    f"{component}: {_fmt(measured, '.3f')} B/param measured, "
                    f"{expected:g} ± {tolerance:g} expected"
                )
                if fit:
                    detail += (
                        f" plus {allowance:.3f} of fixed overhead ({fit.bytes / 2**20:.2f} MiB; "
                        f"fit over {fit.sizes} {prefix}* sizes, asymptote "
                        f"{fit.asymptote:.3f} B/param)"
                    )
            verdicts.append(Verdict(check, subject, measured, expected, tol, status, detail))
    return verdicts


def _paper_verdicts(
    table: PaperTable,
    measured: dict[str, dict[str, Any]],
    checks: Mapping[str, Check],
    columns: tuple[str, str],
    known_differences: Mapping[str, str],
    subject: Callable[[str], str],
    missing: Callable[[str], str],
    what: Callable[[str, dict[str, Any]], str],
) -> list[Verdict]:
    """Each paper row's GiB of params and optim against the ``columns`` of its variant's
    measured row, within the table's relative tolerance; ``missing`` says why a variant has
    none, ``what`` what a part's measurement is."""
    verdicts = []
    for variant, paper in table.rows.items():
        row = measured.get(variant)
        for (part, check), column in zip(checks.items(), columns, strict=True):
            expected: float = getattr(paper, part)
            if row is None:
                why = missing(variant)
                verdicts.append(Verdict(check, subject(variant), None, expected, None, NA, why))
                continue
            tolerance = table.relative_tolerance * expected
            status = within(row[column], expected, tolerance)
            detail = (
                f"{what(part, row)}: {_fmt(row[column], '.3f')} GiB vs paper {expected:g} GiB "
                f"(± {table.relative_tolerance:.0%})"
            )
            known = known_differences.get(variant)
            if status == FAIL and known:  # the expectations file says why: not a failure
                status = KNOWN
                detail += f"; known difference: {known}"
            reason = known if status == KNOWN else None
            verdict = Verdict(
                check, subject(variant), row[column], expected, tolerance, status, detail, reason
            )
            verdicts.append(verdict)
    return verdicts


def _table4_verdicts(probes: _Probes, exp: Expectations) -> list[Verdict]:
    mem = exp.memory

    def what(part: str, row: dict[str, Any]) -> str:
        bpp = row["bpp_params" if part == "params" else "bpp_state"]
        return (
            f"{part} extrapolated from {row['model']} ({_fmt(bpp, '.3f')} B/param) "
            f"to {mem.extrapolate_params:,} parameters"
        )

    return _paper_verdicts(
        mem.table4,
        probes.largest(),
        TABLE4,
        ("x_params_gib", "x_optim_gib"),
        mem.known_differences,
        lambda variant: variant,
        lambda variant: (
            f"{variant} not measured on any {mem.scaling_model_prefix}* model: no extrapolation"
        ),
        what,
    )


def _gpt2_verdicts(probes: _Probes, exp: Expectations) -> list[Verdict]:
    mem = exp.memory
    model = mem.gpt2_124m.model
    measured_rows = {row["variant"]: row for row in probes.rows if row["model"] == model}
    failed_variants = {row["variant"] for row in probes.failed if row["model"] == model}
    return _paper_verdicts(
        mem.gpt2_124m,
        measured_rows,
        GPT2_124M,
        ("gib_params", "gib_optim"),
        mem.known_differences,
        lambda variant: f"{model}/{variant}",
        lambda variant: "probe failed" if variant in failed_variants else "not measured",
        lambda part, _row: part,
    )


def _failed_verdicts(failed: list[Row]) -> list[Verdict]:
    return [
        Verdict(
            Check.PROBE_FAILED,
            f"{row['model']}/{row['variant']}",
            None,
            None,
            None,
            FAIL,
            _first_line(row["error"]),
        )
        for row in failed
    ]


def memory_verdicts(probes: pl.DataFrame, exp: Expectations) -> list[Verdict]:
    """bpp_params/bpp_state/bpp_grads per successful probe (subject "model/variant"),
    table4_params_gib/table4_optim_gib per Table 4 variant (subject the variant),
    gpt2_124m_params_gib/gpt2_124m_optim_gib per appendix variant (subject "gpt-124m/variant")
    and one probe_failed per failed probe (subject "model/variant")."""
    return _verdicts(_Probes.of(probes, exp), exp)


def _verdicts(probes: _Probes, exp: Expectations) -> list[Verdict]:
    return [
        *_bpp_verdicts(probes, exp),
        *_table4_verdicts(probes, exp),
        *_gpt2_verdicts(probes, exp),
        *_failed_verdicts(probes.failed),
    ]


def _notes(probes: _Probes, exp: Expectations) -> list[str]:
    prefix = exp.memory.scaling_model_prefix
    ok = probes.ok
    if ok.height == 0:
        return ["every memory probe failed: no bytes/param measured"]
    if not ok["scaling"].any():
        return [f"no successful probe of a {prefix}* model: scaling and Table 4 checks skipped"]
    return []
