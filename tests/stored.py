"""What the tests count and sum: rows per table, and the points the chunks hold, decoded."""

from __future__ import annotations

from typing import Any

import polars as pl
from sqlalchemy import Connection, func, inspect, select, text
from sqlalchemy.orm import Session

from tracker.models import Curve, Job, Run
from tracker.store.curves import load_curves
from tracker.store.verdict_keys import detail


def stored_points(session: Session) -> pl.DataFrame:
    """Every stored point: ``job``, ``curve_id``, ``step``, ``value``, decoded from its chunk."""
    owners = session.execute(
        select(Curve.id, Job.name).join(Run, Run.id == Curve.run_id).join(Job, Job.id == Run.job_id)
    ).all()
    jobs = pl.DataFrame(
        {"curve_id": [c for c, _ in owners], "job": [j for _, j in owners]},
        schema={"curve_id": pl.Int64, "job": pl.String},
    )
    return load_curves(session, list(jobs["curve_id"])).join(jobs, on="curve_id")


def row_counts(session: Session, models: tuple[Any, ...]) -> dict[str, int]:
    """Rows per table of ``models``, and ``point``: the points their chunks hold."""
    counts = {
        model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
        for model in models
    }
    return {**counts, "point": stored_points(session).height}


def kept_verdicts(connection: Connection) -> list[dict[str, Any]]:
    """Every kept verdict as a row of its columns before revision 0019 (``job_id``,
    ``position``, ``check``, ..., ``detail``, ``known``), in job and position order: at a
    revision since, its key's columns and its detail rebuilt; before, ``job_verdict``'s own."""
    if not inspect(connection).has_table("verdict_key"):
        query = text("SELECT * FROM job_verdict ORDER BY job_id, position")
        return [dict(row._mapping) for row in connection.execute(query)]
    query = text(
        'SELECT v.job_id, v.position, k."check", k.subject, v.measured, k.expected, v.tolerance, '
        "k.status, k.detail_template, v.figures, k.known FROM job_verdict v "
        "JOIN verdict_key k ON k.id = v.key_id ORDER BY v.job_id, v.position"
    )
    rows = []
    for row in connection.execute(query):  # values as the driver gives them, as above
        values = dict(row._mapping)
        figures, known = values.pop("figures"), values.pop("known")
        template = values.pop("detail_template")
        values["detail"] = detail(template, None if figures is None else bytes(figures))
        rows.append({**values, "known": known})
    return rows
