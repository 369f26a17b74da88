"""Claims across jobs: each job's stored verdicts and derived numbers, judged together.

Reads summary rows only (runs, metadata and the per-job rows kept at ingest, see
tracker.store.kept_rows), never curve points, unless a job lacks rows for the expectations
given; it never writes, so it works on a database opened read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl
from sqlalchemy import select
from sqlalchemy.orm import Session

from tracker.analysis.claims.judge import COLUMNS, judge_claims, run_metrics
from tracker.analysis.claims.specs import Compared
from tracker.domain import RunLengths
from tracker.models import Job, JobMeta
from tracker.queries.job_analysis import (
    VerdictBatch,
    job_studies,
    study_judging,
    verdict_batches,
)
from tracker.queries.run_indexes import run_indexes
from tracker.queries.selection import JobSelection, selected_jobs
from tracker.queries.verdict_frames import CompactVerdicts, in_job_order
from tracker.store.frames import query_frame
from tracker.store.value_lists import among
from tracker.store.verdict_columns import VerdictColumns
from tracker.summary.model import NUMBERS

if TYPE_CHECKING:
    from tracker.analysis.expectations import Expectations

GROUP = "group"
# what the claims read of each run (``tracker.summary.run_index.SCHEMA``'s columns)
RUN_COLUMNS = ("job_id", "arm", "variant", "val_loss", "diverged", "steps", "stopped", "hours")
STUDY = "study"  # the group key of a job's study, among jobs of several studies


def _group_label(keys: tuple[str, ...], values: tuple[str | None, ...]) -> str:
    shown = ["(unset)" if value is None else value for value in values]
    if len(keys) == 1:
        return shown[0]
    return ", ".join(f"{key}={value}" for key, value in zip(keys, shown, strict=True))


def _distinct_content(session: Session, jobs: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """The jobs with the first of each content digest in job order, and a note naming the
    others ('' when every job's content is its own)."""
    digests = query_frame(
        session,
        select(Job.id.label("job_id"), Job.content_digest).where(
            among(Job.id, jobs["job_id"].to_list())
        ),
    )
    ordered = jobs.join(digests, on="job_id", how="left", maintain_order="left")
    first = ordered.group_by("content_digest", maintain_order=True).agg(
        pl.col("job").first().alias("kept"), pl.col("job").slice(1).alias("copies")
    )
    copies = [
        f"{', '.join(row['copies'])} (same content as {row['kept']})"
        for row in first.filter(pl.col("copies").list.len() > 0).iter_rows(named=True)
    ]
    kept = ordered.filter(pl.col("job").is_in(first["kept"].to_list())).drop("content_digest")
    note = f"counted once: {'; '.join(copies)}" if copies else ""
    return kept, note


def claims(
    session: Session,
    selection: JobSelection,
    exp: Expectations,
    *,
    jobs: pl.DataFrame | None = None,
    lengths: RunLengths | None = None,
    each_batch: Callable[[VerdictBatch], object] | None = None,
) -> pl.DataFrame:
    """One row per claim and subject over the selected jobs (``selection.jobs`` and
    ``where``); with ``group_by`` one set of rows per group of jobs, in a ``group`` column.
    Each study's jobs are judged apart, by ``exp.judging`` that study; jobs of several
    studies are grouped by study first (``study=NAME`` in the ``group`` column).
    ``selection.models`` and ``variants`` are not used: a claim covers its own subjects.
    ``jobs``: ``selected_jobs(session, selection)``, when the caller has it already;
    ``lengths``: every comparing claim's ``lengths`` instead of its study file's;
    ``each_batch``: handed every selected job's verdict batches (``verdict_batches``, those
    of jobs counted once too), for a caller that needs them besides, so that they are read
    once."""
    selected = selected_jobs(session, selection) if jobs is None else jobs
    jobs, duplicates = _distinct_content(session, selected)
    studies = job_studies(session, jobs["job_id"].to_list())
    jobs = jobs.with_columns(
        pl.col("job_id").replace_strict(studies, default=exp.study_name).alias(STUDY)
    )
    judged = {study: study_judging(session, exp, study) for study in jobs[STUDY].unique()}
    metrics = set().union(*(run_metrics(own) for own in judged.values()))
    read = selected["job_id"].to_list() if each_batch is not None else None
    evidence = _evidence(session, jobs, exp, metrics, read, each_batch)
    keys = ((STUDY,) if jobs[STUDY].n_unique() > 1 else ()) + selection.group_by
    groups = jobs.group_by(list(dict.fromkeys((STUDY, *keys))), maintain_order=True).agg(
        pl.col("job")
    )
    if jobs.height == 0:  # no job: every claim is judged on nothing (inconclusive)
        groups = pl.DataFrame({STUDY: [exp.study_name], "job": [[]]})
    frames = []
    for group in groups.iter_rows(named=True):
        verdicts, numbers, runs, meta = (
            frame.filter(pl.col("job").is_in(group["job"])) for frame in evidence
        )
        study = group[STUDY]  # (of no job: the expectations' own study)
        own = judged[study] if study in judged else exp.judging(study)
        found = judge_claims(verdicts, numbers, runs, meta, _with_lengths(own, lengths))
        for note in (own.provenance, duplicates):
            if note:
                found = found.with_columns(pl.col("detail") + f"; {note}")
        if keys:
            label = _group_label(keys, tuple(group[key] for key in keys))
            found = found.select(pl.lit(label, pl.String).alias(GROUP), pl.all())
        frames.append(found)
    schema = {GROUP: pl.String, **COLUMNS} if keys else COLUMNS
    return pl.concat(frames) if frames else pl.DataFrame(schema=schema)


def _with_lengths(exp: Expectations, lengths: RunLengths | None) -> Expectations:
    """``exp`` with every comparing claim judging runs by ``lengths`` (None: as it says)."""
    if lengths is None:
        return exp
    specs = tuple(
        spec.model_copy(update={"lengths": lengths.value}) if isinstance(spec, Compared) else spec
        for spec in exp.claims
    )
    return exp.model_copy(update={"claims": specs})


def _runs(session: Session, ids: list[int], metrics: set[str]) -> pl.DataFrame:
    """The runs of the jobs ``ids``, with their length (``steps``: the summary's, else the
    loss curve's last step + 1), whether they stopped early (``stopped``: the message, else
    null), their logged wall time in hours and the ``metrics`` their summaries give beyond
    ``val_loss`` (a column each, null where a summary has no such number): of each job's run
    index (``run_indexes``: kept, or made from its checked rows), in job id order, each job's
    runs in ingest order (run id)."""
    extras = sorted(metrics - set(RUN_COLUMNS))
    runs = run_indexes(session, ids, extras).sort("job_id", "id", maintain_order=True)
    return runs.select(*RUN_COLUMNS, *extras)


def _evidence(
    session: Session,
    jobs: pl.DataFrame,
    exp: Expectations,
    metrics: set[str],
    read: list[int] | None = None,
    each_batch: Callable[[VerdictBatch], object] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """What the claims judge, each frame with a ``job`` column naming the job: the stored
    verdicts (in job order), the derived numbers, the runs and the metadata of ``jobs``;
    ``read``: the jobs whose verdicts are read (``jobs`` and more, in the same order), each
    batch handed to ``each_batch`` before the claims keep theirs."""
    ids = jobs["job_id"].to_list()
    names = dict(zip(ids, jobs["job"].to_list(), strict=True))
    position = {job_id: i for i, job_id in enumerate(ids)}
    compact = CompactVerdicts(names, position)
    frames = [compact(VerdictColumns.of_rows([]))]
    numbers_of: dict[int, dict[str, float | None]] = {}
    for columns, batch in verdict_batches(session, ids if read is None else read, exp):
        if each_batch is not None:
            each_batch((columns, batch))
        # without the jobs of the same content as others (read for ``each_batch`` alone)
        frames.append(compact(columns))
        numbers_of.update((job_id, own) for job_id, own in batch.items() if job_id in names)
    verdicts = in_job_order(frames)
    numbers = pl.DataFrame(
        [
            {"job": names[job_id], **{k: numbers_of[job_id].get(k) for k in NUMBERS}}
            for job_id in ids
        ],
        schema={"job": pl.String, **dict.fromkeys(NUMBERS, pl.Float64)},
    )
    # in job order, each job's runs in ingest order: the order the claims' looks follow
    runs = _runs(session, ids, metrics).sort(
        pl.col("job_id").replace_strict(position), maintain_order=True
    )
    meta = query_frame(
        session,
        select(JobMeta.job_id, JobMeta.key, JobMeta.value).where(among(JobMeta.job_id, ids)),
    )
    named = pl.col("job_id").replace_strict(names, return_dtype=pl.String)
    return verdicts, numbers, runs.with_columns(job=named), meta.with_columns(job=named)
