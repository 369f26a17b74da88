"""JSON, one module: how each kind of document writes numbers that JSON has no word for.

Standard JSON has no NaN and no infinities; each reader of the tracker's JSON has its own
need, so there are four named policies and no other encoder:

* **API** (``to_api_json``, ``api_safe``): what ``--format json`` and the server's ``/api/``
  write. NaN is the string ``"NaN"``, +-inf ``"Infinity"`` / ``"-Infinity"``, ``null`` only a
  missing value (so NaN and missing stay apart); times in the listings' format, UTC.
* **figure** (``to_figure_json``): a plotly.js figure inside an HTML page: numpy arrays as
  typed arrays (base64), non-finite numbers in lists ``null``, ``<`` and ``>`` escaped.
* **null** (``to_json``, ``null_non_finite``): the files the report writes beside a job's page
  (``mem_analysis.json`` and ``gpt_analysis.json`` as the study's script wrote them,
  ``verdicts.json``, ``claims.json``), a job's verdicts on every route, and the figures'
  data (plotly draws a gap): every non-finite number is ``null``.
* **storage** (``to_stored_json``, ``from_stored_json``): documents the tracker keeps and reads
  back itself (a job's summary, a JSON column): the bare tokens ``NaN``, ``Infinity``,
  ``-Infinity``, which Python's ``json`` reads back exactly; never served.

Standard library only: numpy's values are recognised through ``sys.modules`` (a value can be
a numpy array only once numpy is imported), so this module never imports it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import re
import sys
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

__all__ = [
    "TIME_FORMAT",
    "api_safe",
    "format_time",
    "from_stored_json",
    "null_non_finite",
    "to_api_json",
    "to_figure_json",
    "to_json",
    "to_stored_json",
]

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # every time shown, in UTC; naive ones are stored UTC


def format_time(moment: datetime) -> str:
    """A time as every listing and the API show it: ISO 8601 in UTC, to the second."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime(TIME_FORMAT)


# API ------------------------------------------------------------------------------------


def _api_scalar(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, Decimal):  # PostgreSQL NUMERIC: a JSON number, as on SQLite
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def api_safe(value: Any) -> Any:
    """``value`` (nested dicts and lists too) under the API policy: non-finite numbers as
    strings, null for missing only, times in the listings' format, NUMERIC as a number."""
    if isinstance(value, dict):
        return {str(key): api_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [api_safe(item) for item in value]
    return _api_scalar(value)


def to_api_json(value: Any, *, indent: int | None = None) -> str:
    """Strict JSON under the API policy: compact, or indented by ``indent`` (the CLI's 2).
    Any other object is written as its ``str``."""
    separators = None if indent is not None else (",", ":")
    return json.dumps(
        api_safe(value), allow_nan=False, default=str, indent=indent, separators=separators
    )


NON_FINITE = re.compile(r"-?Infinity|NaN")  # json's tokens for them, in a list of numbers


def _numpy() -> Any:
    return sys.modules.get("numpy")


# figure ---------------------------------------------------------------------------------

# numpy dtypes plotly.js reads from base64 ("bdata"); others are converted to float64
TYPED_ARRAYS = {
    "float64": "f8",
    "float32": "f4",
    "int32": "i4",
    "int16": "i2",
    "int8": "i1",
    "uint32": "u4",
    "uint16": "u2",
    "uint8": "u1",
}


def _typed_array(value: Any) -> Any:
    """numpy arrays as plotly.js typed arrays (base64), other numpy values as Python's,
    datetimes as ISO 8601."""
    numpy = _numpy()
    if numpy is not None and isinstance(value, numpy.ndarray):
        if value.dtype.name not in TYPED_ARRAYS:
            value = value.astype(numpy.float64)
        array = numpy.ascontiguousarray(value)
        return {
            "dtype": TYPED_ARRAYS[array.dtype.name],
            "bdata": base64.b64encode(array.tobytes()).decode(),
        }
    if numpy is not None and isinstance(value, numpy.generic):
        return value.item()
    if isinstance(value, datetime):  # job times: plotly.js reads ISO 8601 as dates
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} into a figure")


def to_figure_json(fig: Any) -> str:
    """A plotly.js figure as compact strict JSON that is safe inside an HTML ``<script>``
    element.

    numpy arrays are written as plotly.js typed arrays (binary, base64), NaN and +-inf in
    lists as ``null``, and ``<`` / ``>`` as ``\\u`` escapes, so no text can end the element.
    """
    try:
        text = json.dumps(fig, default=_typed_array, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(null_non_finite(fig), default=_typed_array, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


# null -----------------------------------------------------------------------------------


def null_non_finite(value: Any) -> Any:
    """``value`` with every non-finite float as None, in nested dicts (keys as text), lists,
    tuples and dataclasses (as dicts); anything else as it is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): null_non_finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [null_non_finite(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return null_non_finite(dataclasses.asdict(value))
    return value


def to_json(value: Any) -> str:
    """``value`` as indented JSON (indent=2) with NaN and +-inf written as ``null``.

    Python's ``json`` would write the bare tokens ``NaN`` / ``Infinity``, which strict JSON
    parsers (browsers, jq) reject. Dataclasses (``Verdict``, ``JobAnalysis``) become objects.
    """
    return json.dumps(null_non_finite(value), indent=2, allow_nan=False)


# storage --------------------------------------------------------------------------------


def to_stored_json(value: Any, *, sort_keys: bool = False) -> str:
    """JSON with NaN and +-inf as bare tokens: read back exactly by ``from_stored_json``."""
    return json.dumps(value, sort_keys=sort_keys)


def from_stored_json(text: str) -> Any:
    """A document ``to_stored_json`` wrote, its non-finite numbers exactly as they were."""
    return json.loads(text)
