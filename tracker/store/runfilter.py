"""Conditions on a run's own numbers (``val_loss<3.3``, ``nonfinite>0``, ``notes=resumed``)
beside those on its job's metadata, read from summary rows only: the run, its loss curve's
kept summary and its notes, never a curve point.

A condition's key names a run column when it is one of ``RUN_KEYS``, else a metadata key
(``meta.KEY`` names the metadata key even where a run column has its name). A job is
selected when its metadata satisfies the metadata conditions and, if there are run
conditions, at least one of its runs satisfies all of them; a table of runs keeps only those.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import Session

from tracker.conditions import Condition, as_number
from tracker.domain import LOSS
from tracker.errors import (
    NotesOperator,
    NumberComparedToText,
    UnknownNoteKind,
    UnknownWhereKey,
    did_you_mean,
    known_names,
)
from tracker.models import Curve, JobMeta, Run, RunNoteRow
from tracker.notes import NoteKind
from tracker.store.value_lists import among

RUN_FILTERS: dict[str, Any] = {
    "seed": Run.seed,
    "val_loss": Run.val_loss,
    "final_loss": Run.final_loss,
    "diverged": Run.diverged,
    "steps": Curve.n_points,  # how many steps the loss curve logged: the count shown
    "last_step": Curve.last_step,
    "min_loss": Curve.min_value,
    "last_loss": Curve.last_value,
    "nonfinite": Curve.n_nonfinite,
}
NOTES = "notes"  # notes=KIND: a run with a note of that kind; notes!=KIND: without one
RUN_KEYS = frozenset({*RUN_FILTERS, NOTES})
NUMBERS = frozenset(RUN_FILTERS) - {"diverged"}  # compared as numbers only
META_PREFIX = "meta."


def check_where(session: Session, where: Iterable[Condition]) -> None:
    """A condition that cannot be answered is an error, not an empty or full answer: a run
    number compared with text, a note kind no run has and the tracker does not write, a key
    that is neither a run column nor a job's metadata (each naming the known ones)."""
    meta_keys: set[str] | None = None
    for condition in where:
        key = condition.key
        if key == NOTES:
            _check_notes(session, condition)
        elif key in NUMBERS and as_number(condition.value) is None:
            raise NumberComparedToText(key=key, condition=str(condition), value=condition.value)
        elif key not in RUN_KEYS:
            if meta_keys is None:
                meta_keys = set(session.scalars(select(JobMeta.key).distinct()))
            if key.removeprefix(META_PREFIX) not in meta_keys:
                hint = did_you_mean(key, [*RUN_FILTERS, NOTES, *meta_keys])
                columns = ", ".join([*RUN_FILTERS, NOTES])
                raise UnknownWhereKey(
                    key=key, columns=columns, known=known_names(meta_keys), hint=hint
                )


def _check_notes(session: Session, condition: Condition) -> None:
    if condition.op not in ("=", "!="):
        raise NotesOperator(condition=str(condition))
    kinds = {*NoteKind, *session.scalars(select(RunNoteRow.kind).distinct())}
    if condition.value not in kinds:
        raise UnknownNoteKind(kind=condition.value, known=known_names(kinds, near=condition.value))


def run_conditions(where: Iterable[Condition]) -> list[Condition]:
    return [c for c in where if c.key in RUN_KEYS]


def meta_conditions(where: Iterable[Condition]) -> list[Condition]:
    """The conditions on metadata, ``meta.KEY`` read as ``KEY``."""
    return [
        Condition(c.key.removeprefix(META_PREFIX), c.value, c.op)
        for c in where
        if c.key not in RUN_KEYS
    ]


def _holds(condition: Condition, value: Any, kinds: set[str]) -> bool:
    if condition.key == NOTES:
        found = condition.value in kinds
        return found if condition.op == "=" else not found if condition.op == "!=" else False
    if isinstance(value, bool):
        value = "true" if value else "false"
    return condition.holds(value)


def matching_runs(
    session: Session, job_ids: Sequence[int], conditions: Sequence[Condition]
) -> dict[int, int]:
    """The runs of ``job_ids`` satisfying every condition on runs: run id -> job id."""
    names = list(RUN_FILTERS)
    query = (
        select(Run.id, Run.job_id, *(RUN_FILTERS[name].label(name) for name in names))
        .outerjoin(Curve, and_(Curve.run_id == Run.id, Curve.metric == LOSS))
        .where(among(Run.job_id, job_ids))
    )
    kinds: dict[int, set[str]] = {}
    if any(c.key == NOTES for c in conditions):
        noted = (
            select(RunNoteRow.run_id, RunNoteRow.kind).join(Run).where(among(Run.job_id, job_ids))
        )
        for run_id, kind in session.execute(noted):
            kinds.setdefault(run_id, set()).add(kind)
    kept = {}
    for row in session.execute(query).mappings():
        own = kinds.get(row["id"], set())
        if all(_holds(c, row[c.key] if c.key != NOTES else None, own) for c in conditions):
            kept[row["id"]] = row["job_id"]
    return kept
