"""The cross-job section of the report's index: the jobs side by side, in job order.

Job order is the ``time`` metadata given at ingest, else the ingest time (as every cross-job
query). The section has the bytes/param of one model per variant across jobs (figure and
table), the validation loss per variant across jobs (mean +- std over seeds), each arm's
smoothed loss overlaid across the jobs that have it, and the comparison of the two most
recent jobs with its regressions first. A report of fewer than two jobs has a one-line note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from tracker.figures.crossjob import (
    ARM_HEIGHT,
    BPP_HEIGHT,
    VAL_HEIGHT,
    DrawnCurve,
    Job,
    ModelChoice,
    analytic_total,
    arm_across_jobs,
    bpp_across_jobs,
    job_colors,
    pick_model,
    val_loss_across_jobs,
    variant_order,
)
from tracker.figures.trajectories import arm_order
from tracker.report.html import (
    STATUS_CLASS,
    FigureSlot,
    esc,
    figure_html,
    figure_slot,
    fmt_value,
)

if TYPE_CHECKING:
    import plotly.graph_objects as go
    import polars as pl
    from sqlalchemy.orm import Session

    from tracker.analysis.expectations import Expectations
    from tracker.analysis.verdict import Verdict
    from tracker.queries.compare import Comparison

SECTION_ID = "cross-job"
COMPARE_ID = "compare"
NOTE = "Across jobs: nothing to compare, this report covers {n} job{s} (two or more needed)."
# Rows of the comparison table, most important first.
CHANGE_ORDER = ("regressed", "fixed", "changed", "new", "gone", "same")


@dataclass(frozen=True)
class CrossJob:
    """What the index shows across jobs; ``html`` is the whole section."""

    html: str
    job_a: str | None = None  # the compared jobs (the two most recent, in job order)
    job_b: str | None = None
    regressions: int = 0

    def summary_html(self) -> str:
        """One line for the index's summary: the comparison's verdict, linked."""
        if self.job_a is None or self.job_b is None:
            return ""
        n = self.regressions
        what = (
            f'<strong class="fail-text">{n} regression{"s" if n != 1 else ""}</strong>'
            if n
            else "no regression"
        )
        return (
            f'<p class="muted">Latest comparison, {esc(self.job_a)} &rarr; {esc(self.job_b)}: '
            f'{what} (<a href="#{COMPARE_ID}">details</a>).</p>'
        )


def note(count: int) -> CrossJob:
    text = NOTE.format(n=count, s="" if count == 1 else "s")
    return CrossJob(f'<p class="muted crossjob-note" id="{SECTION_ID}">{esc(text)}</p>')


def _job_link(name: str, folders: Mapping[str, str], index: str) -> str:
    folder = folders.get(name)
    if folder is None:
        return esc(name)
    return f'<a href="{quote(folder)}/{index}">{esc(name)}</a>'


def _bpp_table(
    probes: pl.DataFrame,
    jobs: Sequence[Job],
    exp: Expectations,
    choice: ModelChoice,
    folders: Mapping[str, str],
    index: str,
) -> str:
    """The figure's numbers: one row per variant, one column per job, plus the analytic."""
    import polars as pl

    if choice.model is None:
        return ""
    rows = probes.filter(pl.col("model") == choice.model)
    cells = {(r["job"], r["variant"]): r for r in rows.iter_rows(named=True)}
    variants = variant_order(rows.get_column("variant").unique(maintain_order=True).to_list(), exp)
    tolerance = exp.memory.bpp_tolerance
    head = "".join(f'<th class="num">{_job_link(j.name, folders, index)}</th>' for j in jobs)
    body = []
    for variant in variants:
        analytic = analytic_total(exp, variant)
        tds = []
        previous: float | None = None
        for job in jobs:
            row = cells.get((job.name, variant))
            if row is None:
                tds.append('<td class="num absent">\u2014</td>')
                continue
            value = row["bpp_total"]
            if row["n_params"] is None or value is None:
                title = esc(row["error"] or "failed probe")
                tds.append(f'<td class="num off" title="{title}">failed</td>')
                continue
            off = analytic is not None and abs(value - analytic) > tolerance
            rise = ""
            if previous is not None and value - previous > tolerance:
                rise = f'<span class="rise">{value - previous:+.3f}</span>'
            cls = "num off" if off else "num"
            tds.append(f'<td class="{cls}">{value:.3f}{rise}</td>')
            previous = value
        expected = "\u2014" if analytic is None else f"{analytic:g}"
        body.append(
            f'<tr><td class="mono">{esc(variant)}</td><td class="num">{expected}</td>'
            + "".join(tds)
            + "</tr>"
        )
    return (
        '<table class="bpp"><thead><tr><th>variant</th><th class="num">analytic</th>'
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f'<p class="muted">Bytes/param of {esc(choice.model)} (params+optimizer+grads). '
        f"Red: more than {tolerance:g} B/param from the analytic total; "
        f'<span class="rise">+x</span>: a rise of more than {tolerance:g} since the '
        "previous job.</p>"
    )


def _badge(status: str | None) -> str:
    if status is None:
        return '<span class="absent">absent</span>'
    return f'<span class="badge {STATUS_CLASS.get(status, "na")}">{esc(status)}</span>'


def _number(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "\u2014"
    if signed:
        return esc(f"{value:+.4g}")
    return esc(fmt_value(value))


def comparison_html(comparison: Comparison, folders: Mapping[str, str], index: str) -> str:
    """Every row of the comparison, regressions first, after their count and list."""
    import polars as pl

    a = _job_link(comparison.job_a, folders, index)
    b = _job_link(comparison.job_b, folders, index)
    table = comparison.table
    tally = {c: 0 for c in CHANGE_ORDER}
    for change in table.get_column("change").to_list():
        tally[change] = tally.get(change, 0) + 1
    chips = " ".join(
        f'<span class="badge {esc(c)}">{n} {esc(c)}</span>' for c, n in tally.items() if n
    )
    n = len(comparison.regressions)
    if n:
        items = "".join(f"<li>{esc(line)}</li>" for line in comparison.regressions)
        regressions = (
            f'<div class="regressions"><strong>{n} regression{"s" if n != 1 else ""}</strong> '
            f"from {a} to {b}:<ul>{items}</ul></div>"
        )
    else:
        regressions = f'<div class="regressions none">No regression from {a} to {b}.</div>'
    rank = {c: i for i, c in enumerate(CHANGE_ORDER)}
    ordered = table.with_row_index("_row").sort(
        pl.col("change").replace_strict(rank, default=len(rank), return_dtype=pl.Int64), "_row"
    )
    body = []
    for row in ordered.iter_rows(named=True):
        change = row["change"]
        body.append(
            f'<tr class="{esc(change)}"><td><span class="badge {esc(change)}">{esc(change)}'
            f'</span></td><td class="mono">{esc(row["check"])}</td>'
            f"<td>{esc(row['subject'])}</td>"
            f"<td>{_badge(row['status_a'])}</td><td>{_badge(row['status_b'])}</td>"
            f'<td class="num">{_number(row["measured_a"])}</td>'
            f'<td class="num">{_number(row["measured_b"])}</td>'
            f'<td class="num">{_number(row["delta"], signed=True)}</td>'
            f'<td class="num">{_number(row["expected"])}</td>'
            f'<td class="num">{_number(row["tolerance"])}</td></tr>'
        )
    name_a, name_b = esc(comparison.job_a), esc(comparison.job_b)
    return (
        f'<div id="{COMPARE_ID}"><h3>Comparison of the two most recent jobs: {a} &rarr; {b} '
        f"{chips}</h3>{regressions}"
        '<div class="scroll"><table class="comparison"><thead><tr><th>change</th>'
        f"<th>check</th><th>subject</th><th>status {name_a}</th><th>status {name_b}</th>"
        f'<th class="num">measured {name_a}</th><th class="num">measured {name_b}</th>'
        '<th class="num">delta</th><th class="num">expected</th>'
        '<th class="num">tolerance</th></tr></thead><tbody>'
        + "".join(body)
        + "</tbody></table></div>"
        '<p class="muted">Verdicts matched by check and subject. A regression: PASS to FAIL, '
        "a new FAIL of a subject that passed before, or a bytes/param rise beyond the "
        "tolerance.</p></div>"
    )


def cross_job_section(
    session: Session,
    names: Sequence[str],
    folders: Mapping[str, str],
    curves: Mapping[str, Mapping[str, DrawnCurve]],
    verdicts: Mapping[str, Sequence[Verdict]],
    exp: Expectations,
    index: str,
) -> CrossJob:
    """The section for the report's jobs ``names`` (any order: drawn in job order).

    ``curves``: job -> arm -> its smoothed, downsampled loss (``figures.crossjob.drawn_curve``),
    made when the job's data was loaded for its own page, so no curve is read twice here;
    ``verdicts``: job -> its verdicts, for the comparison of the two latest jobs.
    """
    from tracker.queries import tables
    from tracker.queries.compare import compare_verdicts
    from tracker.queries.selection import Selection, selected_jobs

    if len(names) < 2:
        return note(len(names))
    selection = Selection(jobs=tuple(names))
    ordered = selected_jobs(session, selection)
    jobs = [Job(name, time) for name, time in ordered.select("job", "time").iter_rows()]
    probes = tables.probes(session, selection)
    runs = tables.runs(session, selection, aggregate_seeds=True)
    choice = pick_model(probes, exp.memory.scaling_model_prefix)

    def slot(fig: go.Figure, key: str, title: str, height: int) -> FigureSlot:
        return figure_slot(fig, f"x-{key}", title, height)

    bpp = slot(bpp_across_jobs(probes, jobs, exp, choice), "bpp", "Bytes/param", BPP_HEIGHT)
    val = slot(val_loss_across_jobs(runs, jobs, exp), "val", "Validation loss", VAL_HEIGHT)

    colors = job_colors(jobs)
    arms: dict[str, dict[str, DrawnCurve]] = {}
    for job in jobs:
        for arm, curve in curves.get(job.name, {}).items():
            if curve.points:
                arms.setdefault(arm, {})[job.name] = curve
    shared = [arm for arm in arm_order(list(arms), exp) if len(arms[arm]) >= 2]
    arm_figures = "".join(
        figure_html(slot(arm_across_jobs(arm, arms[arm], colors, exp), f"arm-{i}", arm, ARM_HEIGHT))
        for i, arm in enumerate(shared, start=1)
    )
    if not arm_figures:
        arm_figures = '<p class="muted">No training arm appears in two or more of these jobs.</p>'
    else:
        arm_figures = f'<div class="grid2">{arm_figures}</div>'

    a, b = jobs[-2].name, jobs[-1].name
    comparison = compare_verdicts(a, verdicts[a], b, verdicts[b], exp)
    order = " &rarr; ".join(_job_link(job.name, folders, index) for job in jobs)
    html = (
        f'<section class="card" id="{SECTION_ID}"><h2>Across jobs</h2>'
        f'<p class="muted">{len(jobs)} jobs in job order (time metadata, else ingest time): '
        f"{order}</p>"
        f"<h3>Bytes/param per variant</h3>{figure_html(bpp)}"
        f"{_bpp_table(probes, jobs, exp, choice, folders, index)}"
        f"<h3>Validation loss per variant</h3>{figure_html(val)}"
        f"<h3>Training loss of each arm across jobs</h3>{arm_figures}"
        f"{comparison_html(comparison, folders, index)}</section>"
    )
    return CrossJob(html, jobs[-2].name, jobs[-1].name, len(comparison.regressions))
