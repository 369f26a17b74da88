"""The kept verdicts the claims judge, as a frame: built from columns (``VerdictColumns``) a
batch of jobs at a time, in the selection's job order, about 50 bytes a verdict whatever its
texts: the words that repeat across jobs as categories, and a detail only where a check and
subject first appear (the claims quote the first job's alone: ``tracker.analysis.claims.rules``),
rebuilt for those rows alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from tracker.store.verdict_columns import VerdictColumns
from tracker.store.verdict_keys import Key

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
_CLAIMED = pl.struct("check", "subject")  # what a verdict is of
_FIRST = _CLAIMED.is_first_distinct()


class CompactVerdicts:
    """Batches' rows (``VerdictColumns``) of the jobs ``names`` (by id; others dropped), each
    made a frame in their ``position`` order, named by job, with the detail of the first row
    of each check and subject alone (the first of them all is one of these:
    ``in_job_order``). Each batch maps its own jobs and the keys' frame is made once for the
    batches that share their keys (every batch of one read): a read of 10,000 jobs in 20
    batches does not walk every job and key 20 times."""

    def __init__(self, names: dict[int, str], position: dict[int, int]) -> None:
        self.names = names
        self.position = position
        self._keys: tuple[Sequence[Key], pl.DataFrame] | None = None

    def __call__(self, columns: VerdictColumns) -> pl.DataFrame:
        jobs, job_at = np.unique(columns.job_ids, return_inverse=True)
        listed = jobs.tolist()
        order = np.array([self.position.get(job, -1) for job in listed], dtype=np.int64)
        at = np.flatnonzero((order >= 0)[job_at])
        # in job order, a job's rows in theirs (stable; rows in job id order often are already)
        at = at[np.argsort(order[job_at[at]], kind="stable")]
        # each row's key's words gathered by position, as categories: a key's once, not a row's
        shared = self._key_frame(columns.key_rows)[columns.keys[at]]
        first = shared.select(pl.arg_where(_FIRST)).to_series().to_numpy()
        details = pl.Series("detail", [None] * len(at), pl.String)
        if first.size:
            details = details.scatter(first, [columns.detail(row) for row in at[first].tolist()])
        named = pl.Series([self.names.get(job) for job in listed], dtype=pl.Categorical)
        return pl.DataFrame(
            {
                ORDER: order[job_at[at]],
                "job": named.gather(job_at[at]),
                "check": shared.get_column("check"),
                "subject": shared.get_column("subject"),
                "measured": _numbers(columns.measured[at], columns.has_measured[at]),
                "expected": shared.get_column("expected"),
                "tolerance": _numbers(columns.tolerance[at], columns.has_tolerance[at]),
                "status": shared.get_column("status"),
                "detail": details.cast(pl.Categorical),
                "known": shared.get_column("known"),
            }
        )

    def _key_frame(self, key_rows: Sequence[Key]) -> pl.DataFrame:
        if self._keys is None or self._keys[0] is not key_rows:
            frame = pl.DataFrame([key[:5] for key in key_rows], schema=_KEY_SCHEMA, orient="row")
            words = [name for name in frame.columns if name in REPEATED]
            self._keys = (key_rows, frame.with_columns(pl.col(words).cast(pl.Categorical)))
        return self._keys[1]


def in_job_order(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The batches' verdict rows (``CompactVerdicts``) joined in job order (they come in job
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
    # the first row of a check and subject in all is the first of its batch: among the rows
    # with a detail (a batch's firsts, a few thousand), the later ones lose theirs; by
    # expressions: gathering rows or scattering nulls would copy the batches' chunks as one
    with_detail = pl.col("detail").is_not_null()
    shown = verdicts.select(pl.arg_where(with_detail)).to_series().to_numpy()
    first = verdicts.select(_CLAIMED.filter(with_detail).is_first_distinct())
    later = np.zeros(verdicts.height, dtype=np.bool_)
    later[shown[~first.to_series().to_numpy()]] = True
    return verdicts.select(
        *(
            pl.when(pl.lit(later)).then(None).otherwise(c).alias(c) if c == "detail" else c
            for c in VERDICT_COLUMNS
        )
    )


def _numbers(values: np.ndarray, present: np.ndarray) -> pl.Series:
    """``values`` as a Float64 series, null where not ``present`` (a NaN stays a NaN)."""
    series = pl.Series(values, dtype=pl.Float64, nan_to_null=False)
    missing = np.flatnonzero(~present)
    return series.scatter(missing, None) if missing.size else series
