"""The constraints of a study file's values (``tracker.analysis.expectations`` and the claim
kinds' parameters, ``tracker.analysis.claims.kinds``); ``expectations_file.words`` says what
is wrong with a value in the words of the constraint it breaks."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

Number = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(strict=True, gt=0, lt=1, allow_inf_nan=False)]
Rate = Annotated[float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)]
Integer = Annotated[int, Field(strict=True, ge=1)]
String = Annotated[str, Field(strict=True, pattern=r"\S")]
Real = Annotated[float, Field(strict=True, allow_inf_nan=False)]
