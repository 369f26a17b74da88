"""The JSON records of a job directory as pydantic models: probe records and arm summaries.

The models say which keys a record has and what each holds; the checks of a value are
the field validators below, so every problem keeps the one-line message of a ``BadInput``
(the same words whichever way the record is read). Unknown keys are not validated: they are
kept as the record spells them (``extra``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError

from tracker.errors import BadInput

NAME_MAX = 200
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
SURROGATES = re.compile(r"[\ud800-\udfff]")
FLOAT_FIELDS = ("bpp_params", "bpp_state", "bpp_grads", "bpp_params_state_grads")
FAILURE_COLUMNS = ("model", "variant", "error")
INT_LIMIT = 10**15  # no probed model has a quadrillion parameters or bytes
SUMMARY_COLUMNS = ("model", "val_loss", "final_loss", "diverged")  # the rest is ``extra``


@dataclass(frozen=True)
class ProbeRecord:
    model: str
    variant: str
    origin: str  # "mem_sweep.json record 3", for messages
    n_params: int | None = None
    bpp_params: float | None = None
    bpp_state: float | None = None
    bpp_grads: float | None = None
    bpp_params_state_grads: float | None = None
    peak_steady: int | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """The record as probe-table columns."""
        return {
            "model": self.model,
            "variant": self.variant,
            "n_params": self.n_params,
            **{name: getattr(self, name) for name in FLOAT_FIELDS},
            "peak_steady": self.peak_steady,
            "error": self.error,
            "extra": self.extra,
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
    return storable_problem(value, label)


def storable_problem(value: str, label: str) -> str | None:
    # JSON can spell a lone surrogate ("\ud800"), which no database text column can store
    if SURROGATES.search(value):
        return f"{label} contains an unpaired surrogate character"
    return None


def _key(info: ValidationInfo) -> str:
    return repr(info.field_name)


def _name(value: Any, info: ValidationInfo) -> str:
    if value is None:
        raise _Problem(f"missing {_key(info)}")
    if not isinstance(value, str) or not value.strip():
        raise _Problem(f"{_key(info)} must be a non-empty string")
    problem = name_problem(value, _key(info))
    if problem:
        raise _Problem(problem)
    return value


def _optional_name(value: Any, info: ValidationInfo) -> str | None:
    return None if value is None else _name(value, info)


def _error_text(value: Any, _info: ValidationInfo) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value)
    problem = storable_problem(text, "'error'")
    if problem:
        raise _Problem(problem)
    return text.replace("\x00", "\ufffd")  # PostgreSQL text cannot hold NUL


def _bytes_per_param(value: Any, info: ValidationInfo) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Problem(f"{_key(info)} must be a number, got {as_json(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if not math.isfinite(number) or number < 0:
        raise _Problem(f"{_key(info)} must be a finite number >= 0, got {as_json(value)}")
    return number


def _counter(low: int) -> PlainValidator:
    def count(value: Any, info: ValidationInfo) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Problem(f"{_key(info)} must be an integer, got {as_json(value)}")
        if value < low or value >= INT_LIMIT:
            raise _Problem(f"{_key(info)} is out of range: {value}")
        return value

    return PlainValidator(count)


def _optional_number(value: Any, info: ValidationInfo) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Problem(f"{_key(info)} must be a number or null, got {as_json(value)}")
    try:
        return float(value)
    except OverflowError:  # an integer beyond any float: raised as it is, in field order
        raise PydanticCustomError("overflow", "{problem}", {"problem": str(value)}) from None


def _flag(value: Any, info: ValidationInfo) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise _Problem(f"{_key(info)} must be true or false, got {as_json(value)}")
    return value


def _seed(value: Any, info: ValidationInfo) -> Any:
    expected = (info.context or {})["seed"]
    if value is not None and (isinstance(value, bool) or value != expected):
        raise _Problem(f"'seed' is {as_json(value)} but the file name says seed {expected}")
    return value


Name = Annotated[str, PlainValidator(_name)]
ErrorText = Annotated[str | None, PlainValidator(_error_text)]
BytesPerParam = Annotated[float, PlainValidator(_bytes_per_param)]
OptionalNumber = Annotated[float | None, PlainValidator(_optional_number)]


class ProbeFailure(BaseModel):
    """A failed probe: its model, variant and error; whatever else it holds is kept."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: Name
    variant: Name
    error: ErrorText = None


class ProbeMeasurement(ProbeFailure):
    """A probe that measured (it has ``n_params``): every measurement is required."""

    n_params: Annotated[int, _counter(1)]
    bpp_params: BytesPerParam
    bpp_state: BytesPerParam
    bpp_grads: BytesPerParam
    bpp_params_state_grads: BytesPerParam
    peak_steady: Annotated[int, _counter(0)]


class ArmSummary(BaseModel):
    """An arm's summary JSON; validated with ``context={"seed": seed of the file name}``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: Annotated[str | None, PlainValidator(_optional_name)] = None
    seed: Annotated[Any, PlainValidator(_seed)] = None
    val_loss: OptionalNumber = None
    final_loss: OptionalNumber = None
    diverged: Annotated[bool | None, PlainValidator(_flag)] = None


def _first_problem(exc: ValidationError, first: tuple[str, ...]) -> str:
    """Today's order: the keys ``first`` (in field order), then a missing key, then the
    first value in field order that is wrong."""
    errors = exc.errors(include_url=False)
    named = [e for e in errors if e["loc"] and e["loc"][0] in first]
    missing = [e for e in errors if e["type"] == "missing"]
    error = (named or missing or errors)[0]
    if error["type"] == "missing":
        return f"missing {error['loc'][0]!r}"
    if error["type"] == "overflow":
        raise OverflowError("int too large to convert to float")
    return str(error["msg"])


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
    known = set(model.model_fields)
    extra = {key: value for key, value in record.items() if key not in known}
    # the fields as validated, not model_dump(): a serializer calls back into Python, and a
    # Ctrl-C landing there would come out as a PydanticSerializationError
    return ProbeRecord(origin=origin, extra=extra, **dict(probe))


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
