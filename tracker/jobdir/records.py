"""The JSON records of a job directory as frozen pydantic models: the two kinds of probe
record (a failed probe, a measured one) and an arm's summary.

A model says which keys a record has and what each holds, with pydantic's constraints for
the numbers (types strict: ``true`` is no count); every problem becomes the one-line message
of a ``BadInput`` (``_problem``), the same words whichever way the record is read. Unknown keys
of a probe record are not validated: they are kept as the record spells them (``extra``).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    StrictStr,
    ValidationError,
    ValidationInfo,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from tracker.errors import BadInput
from tracker.row_formats import printable

NAME_MAX = 200
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
SURROGATES = re.compile(r"[\ud800-\udfff]")
FLOAT_FIELDS = ("bpp_params", "bpp_state", "bpp_grads", "bpp_params_state_grads")
PROBE_COLUMNS = ("model", "variant", "n_params", *FLOAT_FIELDS, "peak_steady", "error")
FAILURE_COLUMNS = ("model", "variant", "error")
INT_LIMIT = 10**15  # no probed model has a quadrillion parameters or bytes
SUMMARY_COLUMNS = ("model", "val_loss", "final_loss", "diverged")  # the rest is ``extra``


# The words of a constraint's error by its type; of a bytes/param field, their own.
WORDS = {
    "string_type": "{key} must be a non-empty string",
    "int_type": "{key} must be an integer, got {got}",
    "bool_type": "{key} must be true or false, got {got}",
    "greater_than_equal": "{key} is out of range: {value}",
    "less_than": "{key} is out of range: {value}",
    "float_type": "{key} must be a number or null, got {got}",
}
BYTES_PER_PARAM_WORDS = {
    "float_type": "{key} must be a number, got {got}",
    "finite_number": "{key} must be a finite number >= 0, got {got}",
    "greater_than_equal": "{key} must be a finite number >= 0, got {got}",
}


def _Problem(problem: str) -> PydanticCustomError:
    """A value's problem, in the words of the ``BadInput`` it becomes."""
    return PydanticCustomError("bad_input", "{problem}", {"problem": problem})


def as_json(value: Any) -> str:
    """A value as the file spells it (null, true), cut short for one-line messages."""
    text = json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def name_problem(value: str, label: str) -> str | None:
    """Names (models, variants, metrics) are short, printable, storable text."""
    if len(value) > NAME_MAX:
        return f"{label} is longer than {NAME_MAX} characters"
    if CONTROL_CHARS.search(value):
        return f"{label} contains control characters"
    return storable_problem(value, label) or unshown_problem(value, label)


def unshown_problem(value: str, label: str) -> str | None:
    """Text shown as it is must look like what it is: no invisible (U+200B) or
    text-direction (U+202E) character, which would make two different names look alike."""
    if value.isprintable():
        return None
    unshown = next(ch for ch in value if not ch.isprintable())
    return f"{label} contains U+{ord(unshown):04X}, a character that is not printable"


def storable_problem(value: str, label: str) -> str | None:
    # JSON can spell a lone surrogate ("\ud800"), which no database text column can store
    if SURROGATES.search(value):
        return f"{label} contains an unpaired surrogate character"
    return None


def _key(info: ValidationInfo) -> str:
    return repr(info.field_name)


def _name(value: str, info: ValidationInfo) -> str:
    # the rules of a name beyond its type, in the order their messages take precedence
    if not value.strip():
        raise _Problem(f"{_key(info)} must be a non-empty string")
    problem = name_problem(value, _key(info))
    if problem:
        raise _Problem(problem)
    return value


def _error_text(value: Any, _info: ValidationInfo) -> str | None:
    # any JSON value says why a probe failed: kept as its text
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value)
    problem = storable_problem(text, "'error'")
    if problem:
        raise _Problem(problem)
    return text.replace("\x00", "\ufffd")  # PostgreSQL text cannot hold NUL


def _whole_float_as_int(value: Any) -> Any:
    # a writer may print a count as 3.0
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _seed(value: Any, info: ValidationInfo) -> Any:
    expected = (info.context or {})["seed"]
    if value is not None and (isinstance(value, bool) or value != expected):
        raise _Problem(f"'seed' is {as_json(value)} but the file name says seed {expected}")
    return value


Name = Annotated[StrictStr, AfterValidator(_name)]
Count = Annotated[int, BeforeValidator(_whole_float_as_int), Field(strict=True, lt=INT_LIMIT)]
BytesPerParam = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
OptionalNumber = Annotated[float | None, Field(strict=True)]


class ProbeFailure(BaseModel):
    """A failed probe: its model, variant and error; whatever else it holds is kept."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    failed: ClassVar[bool] = True

    model: Name
    variant: Name
    error: Annotated[str | None, PlainValidator(_error_text)] = None
    # set by ``parse_probe_record``, never read from the record
    _origin: str = PrivateAttr("")
    _extra: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def origin(self) -> str:
        """Where the record was read ("mem_sweep.json record 3"), for messages."""
        return self._origin

    @property
    def extra(self) -> dict[str, Any]:
        """The record's other keys, as it spells them."""
        return self._extra

    def columns(self) -> dict[str, Any]:
        """The record as probe-table columns (a failure has no measurements)."""
        validated = {name: getattr(self, name) for name in type(self).model_fields}
        return {**dict.fromkeys(PROBE_COLUMNS), **validated, "extra": self._extra}


class ProbeMeasurement(ProbeFailure):
    """A probe that measured (it has ``n_params``): every measurement is required."""

    failed: ClassVar[bool] = False

    n_params: Annotated[Count, Field(ge=1)]
    bpp_params: BytesPerParam
    bpp_state: BytesPerParam
    bpp_grads: BytesPerParam
    bpp_params_state_grads: BytesPerParam
    peak_steady: Annotated[Count, Field(ge=0)]


ProbeRecord = ProbeFailure | ProbeMeasurement


class ArmSummary(BaseModel):
    """An arm's summary JSON; validated with ``context={"seed": seed of the file name}``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: Name | None = None
    seed: Annotated[Any, PlainValidator(_seed)] = None
    val_loss: OptionalNumber = None
    final_loss: OptionalNumber = None
    diverged: Annotated[bool | None, Field(strict=True)] = None


def _problem(error: ErrorDetails) -> str:
    """One constraint's error in the words of a ``BadInput``."""
    kind, value, key = error["type"], error["input"], error["loc"][0]
    if kind == "missing" or (kind == "string_type" and value is None):
        return f"missing {key!r}"
    if kind == "float_type" and isinstance(value, int) and not isinstance(value, bool):
        # a JSON integer beyond any float: an infinite bytes/param; elsewhere raised as it
        # is, in field order
        if key not in FLOAT_FIELDS:
            raise OverflowError("int too large to convert to float")
        kind = "finite_number"
    words = BYTES_PER_PARAM_WORDS if key in FLOAT_FIELDS else WORDS
    template = words.get(kind)
    if template is None:
        return str(error["msg"])
    return template.format(key=repr(key), got=as_json(value), value=value)


def _first_problem(exc: ValidationError, first: tuple[str, ...]) -> str:
    """Today's order: the keys ``first`` (in field order), then a missing key, then the
    first value in field order that is wrong."""
    errors = exc.errors(include_url=False)
    named = [e for e in errors if e["loc"] and e["loc"][0] in first]
    missing = [e for e in errors if e["type"] == "missing"]
    return _problem((named or missing or errors)[0])


def _says_error(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def parse_probe_record(record: Any, origin: str) -> ProbeRecord:
    """One probe record: a failed one (an ``error``, or no ``n_params``) or one with every
    measurement."""
    if not isinstance(record, dict):
        raise BadInput(path=origin, problem="expected a JSON object")
    # a failed probe says why (``error``) or measured nothing (no ``n_params``): whatever
    # else it holds, an OOM probe's ``n_params`` included, is kept in ``extra`` as is
    measured = "n_params" in record and not _says_error(record.get("error"))
    model = ProbeMeasurement if measured else ProbeFailure
    try:
        probe = model.model_validate(record)
    except ValidationError as exc:
        raise BadInput(path=origin, problem=_first_problem(exc, FAILURE_COLUMNS)) from None
    probe._origin = origin
    probe._extra = {key: value for key, value in record.items() if key not in model.model_fields}
    return probe


def parse_arm_summary(summary: Any, where: str, seed: int) -> tuple[ArmSummary, dict[str, Any]]:
    """An arm's summary and what else it holds (``seed`` included), as the file spells it."""
    if not isinstance(summary, dict):
        raise BadInput(path=where, problem="expected a JSON object")
    try:
        parsed = ArmSummary.model_validate(summary, context={"seed": seed})
    except ValidationError as exc:
        raise BadInput(path=where, problem=_first_problem(exc, ())) from None
    extra = {key: value for key, value in summary.items() if key not in SUMMARY_COLUMNS}
    return parsed, extra


HEADER_NAMES_SHOWN = 12


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def missing_columns(header: list[str]) -> str:
    """What a header without ``step`` or ``loss`` has instead: its names, or that it is data."""
    problem = "header must have 'step' and 'loss' columns"
    if all(_number(name) for name in header):
        return f"{problem}; line 1 is numbers, not a header"
    # escaped: a form feed or a line separator in a name would break the one-line error
    shown = ", ".join(printable(f"{name:.60}") for name in header[:HEADER_NAMES_SHOWN])
    more = len(header) - HEADER_NAMES_SHOWN
    return f"{problem}; found: {shown}" + (f" and {more} more" if more > 0 else "")
