"""The kept verdicts the claims judge, as a frame: built from columns (``VerdictColumns``) a
batch of jobs at a time, in the selection's job order, about 50 bytes a verdict whatever its
texts: the words that repeat across jobs as categories, and a detail only where a check and
subject first appear (the claims quote the first job's alone: ``tracker.analysis.claims.rules``),
rebuilt for those rows alone."""

from __future__ import annotations

import numpy as np
import polars as pl

from tracker.store.verdict_columns import VerdictColumns

ORDER = "order"  # a verdict row's job's position in job order, while the batches are joined
VERDICT_COLUMNS = [
    "job", "check", "subject", "measured", "expected", "tolerance", "status", "detail", "known"
]  # fmt: skip
REPEATED = ("job", "check", "subject", "status", "detail", "known")
_KEY_SCHEMA = {
    "check": pl.String,
    "subject": pl.String,
    "expected": pl.Float64,
    "status": pl.String,
    "known": pl.String,
}
_FIRST = pl.struct("check", "subject").is_first_distinct()


def compact_verdicts(
    columns: VerdictColumns, names: dict[int, str], position: dict[int, int]
) -> pl.DataFrame:
    """A batch's rows of the jobs ``names`` (by id; others dropped) in their ``position``
    order, named by job, with the detail of the first row of each check and subject alone (the
    first of them all is one of these: ``in_job_order``)."""
    at = np.flatnonzero(np.isin(columns.job_ids, np.fromiter(names, np.int64, len(names))))
    frame = pl.DataFrame(
        {
            "row": at,
            "job_id": columns.job_ids[at],
            "key": columns.keys[at],
            "measured": _numbers(columns.measured[at], columns.has_measured[at]),
            "tolerance": _numbers(columns.tolerance[at], columns.has_tolerance[at]),
        },
        schema={
            "row": pl.Int64,
            "job_id": pl.Int64,
            "key": pl.Int64,
            "measured": pl.Float64,
            "tolerance": pl.Float64,
        },
    )
    keys = pl.DataFrame(
        [key[:5] for key in columns.key_rows], schema=_KEY_SCHEMA, orient="row"
    ).with_row_index("key")
    ordered = (
        frame.with_columns(
            pl.col("job_id").replace_strict(position, return_dtype=pl.Int64).alias(ORDER)
        )
        .sort(ORDER, maintain_order=True)
        .join(keys.cast({"key": pl.Int64}), on="key", how="left", maintain_order="left")
    )
    first = ordered.select(pl.arg_where(_FIRST)).to_series().to_list()
    rows = ordered.get_column("row").gather(first).to_list()
    details = pl.Series("detail", [None] * ordered.height, pl.String)
    if first:
        details = details.scatter(first, [columns.detail(row) for row in rows])
    return ordered.select(
        ORDER,
        pl.col("job_id").replace_strict(names, return_dtype=pl.String).alias("job"),
        "check",
        "subject",
        "measured",
        "expected",
        "tolerance",
        "status",
        pl.lit(details),
        "known",
    ).with_columns(pl.col(REPEATED).cast(pl.Categorical))


def in_job_order(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The batches' verdict rows (``compact_verdicts``) joined in job order (they come in job
    id order, a study at a time), with the detail of the first row of each check and subject
    alone (the claims quote that one). ``frames`` is emptied: reordered, each column is freed
    in turn, so that the rows are never held twice."""
    verdicts = pl.concat(frames)
    frames.clear()
    if not verdicts.get_column(ORDER).is_sorted():
        at = verdicts.select(pl.arg_sort_by(ORDER, maintain_order=True)).to_series()
        columns = {}
        for name in VERDICT_COLUMNS:
            columns[name] = verdicts.get_column(name).gather(at)
            verdicts = verdicts.drop(name)
        verdicts = pl.DataFrame(columns)
    return verdicts.select(
        *(pl.when(_FIRST).then(pl.col(c)).alias(c) if c == "detail" else c for c in VERDICT_COLUMNS)
    )


def _numbers(values: np.ndarray, present: np.ndarray) -> pl.Series:
    """``values`` as a Float64 series, null where not ``present`` (a NaN stays a NaN)."""
    series = pl.Series(values, dtype=pl.Float64, nan_to_null=False)
    missing = np.flatnonzero(~present)
    return series.scatter(missing, None) if missing.size else series
