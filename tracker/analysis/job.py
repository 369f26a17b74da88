"""One job's whole analysis: the study script's two JSON documents plus explicit verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracker.analysis.memory import memory_parts
from tracker.analysis.training import analyze_training
from tracker.analysis.verdict import Verdict
from tracker.domain import JobData

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

    from tracker.analysis.expectations import Expectations

__all__ = ["JobAnalysis", "analyze_job"]


@dataclass
class JobAnalysis:
    mem: dict[str, Any]  # the script's mem_analysis.json; {} without probes
    gpt: dict[str, Any]  # the script's gpt_analysis.json; {} without training arms
    verdicts: list[Verdict] = field(default_factory=list)  # memory first, then training
    notes: list[str] = field(default_factory=list)  # what could not be analysed, and why
    tracking: dict[str, float | None] = field(default_factory=dict)  # TRACKING_NUMBERS


def analyze_job(
    data: JobData, exp: Expectations, smoothed: Mapping[str, np.ndarray] | None = None
) -> JobAnalysis:
    """Analyse whatever parts the job has; a missing part is a note, never an exception.

    ``smoothed``: arm -> ``smooth`` of its loss, when the caller has it (``analyze_training``).
    """
    notes: list[str] = []
    verdicts: list[Verdict] = []
    mem: dict[str, Any] = {}
    judged = exp.judges("memory")  # a study without [memory] judges no probe
    if judged and data.probes.height == 0:
        notes.append("no memory probes: memory analysis skipped")
    elif judged:
        mem, memory_checks, memory_notes = memory_parts(data.probes, exp)
        verdicts.extend(memory_checks)
        notes.extend(memory_notes)
    training = analyze_training(data.runs, data.curves, exp, smoothed)
    verdicts.extend(training.verdicts)
    notes.extend(training.notes)
    return JobAnalysis(mem, training.gpt, verdicts, notes, training.tracking)
