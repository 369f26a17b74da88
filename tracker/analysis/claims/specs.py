"""The claim kinds a study file's ``[[claims]]`` may list, each with the pydantic model of its
parameters (docs/studies.md lists them); ``parse_claims`` checks the list as read from the
file and says what is wrong with the first bad entry in one line."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from tracker.analysis.expectations_file import words
from tracker.analysis.fields import Fraction, Integer, Positive, Real, String
from tracker.errors import did_you_mean

Design = Literal["anytime", "fixed"]
Lengths = Literal["matched", "own"]  # tracker.domain.RunLengths' values
MemoryCheck = Literal["bytes_per_param", "table4", "gpt2_124m", "probe_failures"]
MIN_RUNS = 3  # runs per variant below which a comparing claim decides nothing
ALL_MEMORY_CHECKS: tuple[MemoryCheck, ...] = ("bytes_per_param", "table4", "gpt2_124m",
                                              "probe_failures")  # fmt: skip


class ClaimSpec(BaseModel):
    """What every claim states: its kind and the sentence it stands for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    statement: String  # the claim in the paper's words: `tracker studies` and docs show it


class MemoryClaim(ClaimSpec):
    """The per-job memory checks judged job by job ([memory] holds their numbers)."""

    kind: Literal["memory"]
    checks: tuple[MemoryCheck, ...] = ALL_MEMORY_CHECKS


class Compared(ClaimSpec):
    """Two variants' mean of a run's final ``metric``, their difference against a margin."""

    metric: String = "val_loss"
    # the variants compared; unset: those of [training]'s candidate and baseline arms
    candidate: String | None = None
    baseline: String | None = None
    margin: Positive
    level: Fraction = 0.90
    design: Design = "anytime"
    # "matched": only runs of one length compared (a row per length); "own": each variant's
    # runs at its own full length (a record's point may be fewer steps to the same loss)
    lengths: Lengths = "matched"
    # a pre-registered run count per variant: judged once, on the first N runs of each by
    # ingest order, by the fixed-sample test; unset: the anytime rule (or `design`)
    planned_runs: Integer | None = None
    tuned_runs: Positive = 20.0  # runs per variant where the confidence sequence is tightest
    bootstrap_resamples: Integer = 2000
    bootstrap_seed: Integer = 1

    @model_validator(mode="after")
    def _plan_of_three(self) -> Compared:
        if self.planned_runs is not None and self.planned_runs < MIN_RUNS:
            raise PydanticCustomError(
                "expectation",
                f"planned_runs must be at least {MIN_RUNS} (no decision from fewer runs per "
                f"variant), got {self.planned_runs}",
            )
        return self


class EquivalenceClaim(Compared):
    """Candidate minus baseline within ± margin."""

    kind: Literal["equivalence"]


class NoninferiorityClaim(Compared):
    """The candidate no worse than the baseline by more than the margin."""

    kind: Literal["noninferiority"]
    better: Literal["lower", "higher"] = "lower"  # which way of the metric is better


class ThresholdClaim(ClaimSpec):
    """One variant's mean of a run's final ``metric`` below (or above) a target."""

    kind: Literal["threshold"]
    metric: String = "val_loss"
    target: Real
    side: Literal["below", "above"] = "below"
    level: Fraction = 0.95
    design: Design = "anytime"
    variants: tuple[String, ...] | None = None  # unset: every variant the study's jobs ran
    # only the jobs whose metadata has these values (the speedrun's track = "2"); unset: all
    where: dict[str, String] | None = None
    tuned_runs: Positive = 20.0  # runs where the confidence sequence is tightest

    @model_validator(mode="after")
    def _one_sided_level(self) -> ThresholdClaim:
        if self.level <= 0.5:
            raise PydanticCustomError(
                "expectation",
                f"level must be in (0.5, 1) for a one-sided claim, got {self.level!r}",
            )
        return self


class TracksClaim(ClaimSpec):
    """The candidate arm's loss tracks the baseline's as closely as the seed twin's does
    ([training] names the arms and the factor) in at least ``min_share`` of the jobs."""

    kind: Literal["tracks_seed_noise"]
    metric: Literal["loss"] = "loss"
    min_share: Fraction
    level: Fraction = 0.95
    design: Design = "anytime"


class DivergesClaim(ClaimSpec):
    """An arm (an ablation) diverges: a non-finite loss, in every job that ran it."""

    kind: Literal["diverges"]
    metric: Literal["loss"] = "loss"
    arm: String | None = None  # unset: [training] divergent


SPECS: dict[str, type[ClaimSpec]] = {
    "memory": MemoryClaim,
    "equivalence": EquivalenceClaim,
    "noninferiority": NoninferiorityClaim,
    "threshold": ThresholdClaim,
    "tracks_seed_noise": TracksClaim,
    "diverges": DivergesClaim,
}


def _problem(text: str) -> PydanticCustomError:
    return PydanticCustomError("expectation", "{problem}", {"problem": text})


def _entry_problem(exc: ValidationError, model: type[ClaimSpec]) -> str:
    """The first problem of one entry: the key and what is wrong with it."""
    errors = exc.errors(include_url=False)
    unknown = [str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        near = did_you_mean(unknown[0], model.model_fields)
        return f"unknown key {', '.join(unknown)}{near}"
    error = errors[0]
    key = ".".join(map(str, error["loc"]))
    if error["type"] == "missing":
        return f"missing key {key}"
    if error["type"] == "literal_error":
        return f"{key} must be {error['ctx']['expected']}, got {error['input']!r:.60}"
    if error["type"] == "expectation":
        return str(error["msg"])
    return f"{key} {words(error)}"


def parse_claims(value: Any) -> tuple[ClaimSpec, ...]:
    """The ``[[claims]]`` of a study file, each checked by its kind's model."""
    if not isinstance(value, list):
        raise _problem(f"must be a list of [[claims]] tables, got {value!r:.60}")
    found = []
    for at, entry in enumerate(value, start=1):
        if not isinstance(entry, dict):
            raise _problem(f"#{at} must be a table, got {entry!r:.60}")
        kind = entry.get("kind")
        if kind is None:
            raise _problem(f"#{at}: missing key kind (one of {', '.join(SPECS)})")
        if kind not in SPECS:
            raise _problem(
                f"#{at}: unknown claim kind {kind!r}; the known kinds: {', '.join(SPECS)}"
                + did_you_mean(str(kind), SPECS)
            )
        model = SPECS[kind]
        try:
            found.append(model.model_validate(entry))
        except ValidationError as exc:
            raise _problem(f"#{at} ({kind}): {_entry_problem(exc, model)}") from None
    return tuple(found)
