"""What a job is checked against: its study's file (``tracker/studies/NAME.toml``) or a
user's copy, as frozen pydantic models, one per table, that the analysis reads directly.

``load_expectations()`` validates the whole file up front (every key present, of the right
type and range, no unknown key) so that a typo fails loudly with the file and the key,
instead of silently turning a check into N/A halfway through a report. The one-line message
of the first problem is ``tracker.analysis.expectations_file.problem_of``'s.
"""

from __future__ import annotations

import hashlib
import tomllib
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, PrivateAttr, ValidationError

from tracker.analysis.claims.specs import ClaimSpec, MemoryClaim, parse_claims
from tracker.analysis.expectations_file import problem_of
from tracker.analysis.fields import Fraction, Integer, Keys, Number, Positive, Rate, String
from tracker.analysis.sample_spec import SampleSpec
from tracker.analysis.study_files import StoredStudy, StudyFile, study_files, study_text
from tracker.errors import BadExpectations, UnknownStudy, known_names

DEFAULT_STUDY = "flashoptim"
COMPONENTS = ("params", "state", "grads")
# The probe fields of bytes/param and the components each one sums.
BPP_SUMS = {f"bpp_{c}": (c,) for c in COMPONENTS} | {"bpp_params_state_grads": COMPONENTS}


class _Table(BaseModel):
    """A TOML table of fixed keys: a key not listed here is a typo."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class _Rows(BaseModel):
    """A TOML table of a few fixed keys and one row per variant (its other keys)."""

    model_config = ConfigDict(extra="allow", frozen=True)


class ComponentBpp(_Table):
    """A variant's analytic bytes per parameter; a component left out is not checked."""

    params: Number | None = None
    state: Number | None = None
    grads: Number | None = None

    def get(self, component: str) -> float | None:
        value: float | None = getattr(self, component)
        return value


class PaperGib(_Table):
    """A paper's GiB of parameters and of optimizer state for one variant."""

    params: Positive
    optim: Positive


class PaperTable(_Rows):
    """Paper rows per variant, compared with a relative tolerance."""

    relative_tolerance: Number
    __pydantic_extra__: dict[str, PaperGib]

    @property
    def rows(self) -> dict[str, PaperGib]:
        return dict(self.model_extra or {})


class ModelTable(PaperTable):
    """Paper rows of one model's own size (the appendix's GPT-2 124M)."""

    model: String


class MemoryExpectations(_Table):
    gib: Integer
    extrapolate_params: Integer
    scaling_model_prefix: String
    bpp_tolerance: Number
    expected_bpp: dict[str, ComponentBpp]  # in file order: the order of the verdicts
    table4: PaperTable
    gpt2_124m: ModelTable
    known_differences: dict[str, String]  # variant -> why the study differs from the paper


class ValLoss(_Rows):
    """The final validation loss: tolerances, and the paper's number per variant (the rows)."""

    tolerance: Number
    candidate_margin: Positive  # candidate minus baseline, per job
    paper_steps: Integer  # the paper's run length: where its validation losses apply
    level: Fraction  # of the interval of the job's own check (candidate minus baseline)
    __pydantic_extra__: dict[str, Positive]

    def paper(self, variant: str) -> float | None:
        """The paper's final validation loss of ``variant``, if it reports one."""
        value: float | None = (self.model_extra or {}).get(variant)
        return value


class TrainingExpectations(_Table):
    ema_alpha: Rate
    baseline: String
    candidate: String
    seed_twin: String
    divergent: String
    noise_factor: Number  # the cross-job tracking claim's limit
    job_noise_factor: Number  # one job's own tracking check's limit
    val_loss: ValLoss


class GateExpectations(_Table):
    """When ``compare`` counts a change as a regression."""

    configuration: Keys  # metadata keys whose values comparable jobs share
    alpha: Fraction  # significance of the EMA delta against the comparable jobs' seed noise
    min_noise_jobs: Integer  # comparable jobs' values needed to measure a spread; fewer: tolerance
    ema_margin_factor: Positive  # candidate delta above this many pooled seed-noise deltas
    false_alarm: Fraction = 0.01  # one-sided level of the comparable jobs' prediction bound


class Study(_Table):
    """Which paper a study file reproduces (``tracker studies`` lists them)."""

    name: String
    title: String
    paper: String  # authors, title, venue and year
    source: String  # where its numbers come from
    trajectories: String | None = None  # the job page's training figure's title


class Look(_Table):
    """How the figures draw a variant or an arm."""

    label: String
    color: Annotated[str, Field(strict=True, pattern=r"^#[0-9a-f]{6}$")]
    # the memory figure's label of the paper's analytic total for a variant ({total}: B/param)
    paper_line: String | None = None


class Style(_Table):
    """The labels and colours of the study's variants and of its training arms."""

    variants: dict[str, Look]
    arms: dict[str, Look]


# What a study without a [memory] or [training] table is read with: numbers no per-job
# check judges by (``Expectations.judges``), for the figures that still draw its jobs.
NO_MEMORY: dict[str, Any] = {
    "gib": 2**30, "extrapolate_params": 124_000_000, "scaling_model_prefix": "gpt",
    "bpp_tolerance": 0.05, "expected_bpp": {}, "known_differences": {},
    "table4": {"relative_tolerance": 0.05},
    "gpt2_124m": {"model": "gpt-124m", "relative_tolerance": 0.05},
}  # fmt: skip
NO_TRAINING: dict[str, Any] = {
    "ema_alpha": 0.02, "baseline": "-", "candidate": "-", "seed_twin": "-", "divergent": "-",
    "noise_factor": 1.0, "job_noise_factor": 2.0,
    "val_loss": {"tolerance": 0.05, "candidate_margin": 0.01, "paper_steps": 1, "level": 0.9},
}  # fmt: skip


class Expectations(_Table):
    """An expectations file as it is written: every table and key, each checked."""

    # optional: a study without them judges no per-job memory or training check
    memory: MemoryExpectations = Field(
        default_factory=lambda: MemoryExpectations.model_validate(NO_MEMORY)
    )
    training: TrainingExpectations = Field(
        default_factory=lambda: TrainingExpectations.model_validate(NO_TRAINING)
    )
    # what the study claims, judged across its jobs, in this order (``[[claims]]``)
    claims: Annotated[tuple[ClaimSpec, ...], PlainValidator(parse_claims)]
    gate: GateExpectations
    study: Study | None = None  # a user's copy may leave it out
    style: Style | None = None  # the figures read the packaged studies' (``study_styles``)
    sample: SampleSpec | None = None  # the demo's sample jobs (none: the study has no demo)
    _source: str = PrivateAttr("")
    _packaged: bool = PrivateAttr(False)
    _missing: str | None = PrivateAttr(None)  # why a stored job's study is not judged here
    _digest: str = PrivateAttr("")  # of a study file's text (``StoredStudy``)
    _provenance: str | None = PrivateAttr(None)  # of a study judged not by its file alone

    @property
    def source(self) -> str:
        """The file they were read from, for reports."""
        return self._source

    @property
    def study_name(self) -> str:
        return DEFAULT_STUDY if self.study is None else self.study.name

    def judges(self, table: str) -> bool:
        """Whether the file gives ``table`` ("memory", "training"): its per-job checks."""
        return table in self.model_fields_set

    @property
    def memory_checks(self) -> tuple[str, ...]:
        """The memory checks the study's memory claim names (none when it has none)."""
        memory = [spec for spec in self.claims if isinstance(spec, MemoryClaim)]
        return memory[0].checks if memory else ()

    def target(self, metric: str, variant: str) -> tuple[float, float] | None:
        """What ``metric`` of ``variant`` is checked against and the tolerance either side:
        the analytic bytes/param of a component or of their sum (``bpp_tolerance``), the
        paper's final validation loss (``val_loss.tolerance``); None for anything else."""
        if metric == "val_loss":
            paper = self.training.val_loss.paper(variant)
            return None if paper is None else (paper, self.training.val_loss.tolerance)
        bpp = self.memory.expected_bpp.get(variant)
        if bpp is None or metric not in BPP_SUMS:
            return None
        values = [bpp.get(component) for component in BPP_SUMS[metric]]
        if None in values:
            return None
        return sum(v for v in values if v is not None), self.memory.bpp_tolerance

    def _as_study(self) -> Expectations:
        """These, as a study's (``judging`` then judges each job by its own study's)."""
        self._packaged = True
        return self

    @property
    def missing(self) -> str | None:
        """Why a job of this study is not judged (no file here, no readable stored
        definition), else None."""
        return self._missing

    @property
    def digest(self) -> str:
        """The sha256 of the study file's text these were read from ('' for a user's file)."""
        return self._digest

    @property
    def provenance(self) -> str | None:
        """What a study's pages and claims say of the definition judging them when it is
        not simply its file: the one stored in the database, or its file where the stored
        one differs; else None."""
        return self._provenance

    def judging(self, study: str, stored: StoredStudy | None = None) -> Expectations:
        """What judges a job of ``study`` (``stored``: the definition the database keeps of
        it): that study's expectations (``judged_by``) when these are a study's too, else
        these (a user's file judges every job it is given)."""
        return judged_by(study, stored) if self._packaged else self


def _parse(doc: dict[str, Any], source: str) -> Expectations:
    try:
        checked = Expectations.model_validate(doc)
    except ValidationError as exc:
        raise BadExpectations(path=source, problem=problem_of(exc)) from None
    checked._source = source
    return checked


def study_names() -> list[str]:
    """The known studies (``study_files``), the default first, then by name."""
    return sorted(study_files(), key=lambda name: (name != DEFAULT_STUDY, name))


def check_study(name: str) -> str:
    """``name`` if a study of that name is known; else ``UnknownStudy``."""
    known = study_names()
    if name not in known:
        raise UnknownStudy(study=name, known=known_names(known, near=name))
    return name


def study_expectations(name: str = DEFAULT_STUDY) -> Expectations:
    """The expectations of the study ``name``, from its file (each file read once)."""
    check_study(name)
    return _study_file(study_files()[name])


def judged_by(name: str, stored: StoredStudy | None = None) -> Expectations:
    """The expectations of the study of a stored job, ``stored`` being the definition the
    database keeps of it (its latest job's): its file's when one of that name is here (a
    stored definition that differs is said, ``provenance``); else the stored one (a
    teammate's study); else none: such a job is listed and shown, never judged."""
    if name in study_names():
        found = study_expectations(name)
        if stored is None or stored.digest == found.digest:
            return found
        return _differing(name, found.source, found.digest, stored.digest)
    return _unjudged(name) if stored is None else _stored(name, stored)


@cache
def _differing(name: str, source: str, digest: str, stored: str) -> Expectations:
    """The study's file's expectations (``source``, its text's ``digest``), saying that
    the definition stored with its jobs (``stored``) differs."""
    said = study_expectations(name).model_copy()  # the same values: the same kept rows
    said._provenance = (
        f"judged by the study file {source}; the definition stored with its jobs "
        f"differs (digest {stored[:12]}, the file's {digest[:12]})"
    )
    said._source = f"{source} (the stored definition differs: digest {stored[:12]})"
    return said


@cache
def _stored(name: str, stored: StoredStudy) -> Expectations:
    where = f"the definition of study {name!r} stored in the database (digest {stored.digest[:12]})"
    if hashlib.sha256(stored.text.encode("utf-8")).hexdigest() != stored.digest:
        return _unjudged(name, f"{where} is not the text of that digest: its jobs are not judged")
    try:
        exp = _parse(tomllib.loads(stored.text), where)
    except tomllib.TOMLDecodeError as exc:
        return _unjudged(name, f"{where} is not valid TOML ({exc}): its jobs are not judged")
    except BadExpectations as exc:
        return _unjudged(name, f"{exc}: its jobs are not judged")
    if exp.study_name != name:
        return _unjudged(name, f"{where} is of study {exp.study_name!r}: its jobs are not judged")
    exp._digest = stored.digest
    exp._provenance = f"judged by {where}: no file {name}.toml here"
    _read_stored[name] = exp
    return exp._as_study()


_read_stored: dict[str, Expectations] = {}  # name -> its stored definition read last


def judged_stored() -> dict[str, Expectations]:
    """The studies judged by a database's stored definition in this process (their looks
    are drawn too: ``tracker.analysis.study_looks``)."""
    return dict(_read_stored)


@cache
def _unjudged(name: str, why: str | None = None) -> Expectations:
    gate = {key: list(value) if isinstance(value, tuple) else value
            for key, value in study_expectations(DEFAULT_STUDY).gate}  # fmt: skip
    study = {"name": name, "title": name, "paper": "-", "source": "-"}
    unjudged = _parse({"claims": [], "gate": gate, "study": study}, f"no file {name}.toml")
    unjudged._packaged = True
    unjudged._missing = why or (
        f"study {name!r} has no file here (packaged, --studies or TRACKER_STUDIES: "
        f"{name}.toml): its jobs are stored, not judged"
    )
    return unjudged


@cache
def _study_file(found: StudyFile) -> Expectations:
    if not found.packaged:
        exp = load_expectations(Path(str(found.file)))
    else:
        exp = _parse(tomllib.loads(found.file.read_text("utf-8")), found.source)
    exp._digest = study_text(found).digest
    return exp._as_study()


def study_definition(name: str) -> StoredStudy:
    """The text of the file of the study ``name`` (known: ``check_study``) and its digest,
    as an ingest stores it with the job."""
    return study_text(study_files()[name])


def load_expectations(path: Path | None = None) -> Expectations:
    """The default study's packaged expectations, or those of the TOML file ``path``.

    Raises ``BadExpectations`` (naming the file and the key) when the file is missing or
    unreadable, is not valid TOML, or has a missing, mistyped or unknown key.
    """
    if path is None:
        return study_expectations(DEFAULT_STUDY)
    source = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise BadExpectations(path=source, problem="no such file") from None
    except IsADirectoryError:
        raise BadExpectations(path=source, problem="is a directory, not a file") from None
    except OSError as exc:
        raise BadExpectations(path=source, problem=f"cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise BadExpectations(path=source, problem="not UTF-8 text") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadExpectations(path=source, problem=f"invalid TOML: {exc}") from None
    return _parse(doc, source)
