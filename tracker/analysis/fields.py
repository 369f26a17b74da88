"""The constraints of a study file's values (``tracker.analysis.expectations`` and the claim
kinds' parameters, ``tracker.analysis.claims.kinds``); ``expectations_file.words`` says what
is wrong with a value in the words of the constraint it breaks."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, PlainValidator
from pydantic_core import PydanticCustomError

Number = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(strict=True, gt=0, lt=1, allow_inf_nan=False)]
Rate = Annotated[float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)]
Integer = Annotated[int, Field(strict=True, ge=1)]
String = Annotated[str, Field(strict=True, pattern=r"\S")]
Real = Annotated[float, Field(strict=True, allow_inf_nan=False)]


def _keys(value: Any) -> tuple[str, ...]:
    """A list of distinct, non-empty metadata keys (``[gate] configuration``)."""
    if not isinstance(value, list):
        raise _problem(f"must be a list of metadata keys, got {value!r:.60}")
    for key in value:
        if not isinstance(key, str) or not key.strip():
            raise _problem(f"must be a non-empty string, got {key!r:.60}")
    if len(set(value)) != len(value):
        raise _problem(f"must not repeat a key, got {value!r:.60}")
    return tuple(value)


def _problem(text: str) -> PydanticCustomError:
    """What is wrong with a value; ``problem_of`` puts the key's dotted path before it."""
    return PydanticCustomError("expectation", "{problem}", {"problem": text})


Keys = Annotated[tuple[str, ...], PlainValidator(_keys)]
