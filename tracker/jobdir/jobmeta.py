"""A job's own metadata: ``job.json`` or ``meta.json`` in its directory.

The file is one flat JSON object whose values are strings or numbers, e.g.
``{"gpu": "H100", "flashoptim": "0.1.4", "time": "2026-10-15T09:00Z", "world_size": 8}``;
ingest takes its keys as the job's metadata (``--meta`` wins). Metadata is not content: the
file is not part of the job's content digest. A key is spelled as ``tracker.domain.META_KEY``
says, as the CLI checks ``--meta`` keys before it imports the library.
"""

from __future__ import annotations

import json
import math

from tracker.domain import META_KEY
from tracker.errors import BadInput

META_FILES = ("job.json", "meta.json")
META_VALUE_MAX = 1000


def parse_job_meta(filename: str, data: bytes) -> dict[str, str]:
    """The metadata a job's ``job.json`` / ``meta.json`` holds, each value as text."""
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise BadInput(path=filename, problem="not UTF-8 text") from None
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise BadInput(path=filename, problem=f"malformed JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BadInput(path=filename, problem="expected a JSON object of metadata keys")
    meta: dict[str, str] = {}
    for key, value in document.items():
        if not META_KEY.fullmatch(key):
            raise BadInput(path=filename, problem=f"key {key!r:.60} is not a metadata key")
        meta[key] = _meta_value(filename, key, value)
    return meta


def _meta_value(filename: str, key: str, value: object) -> str:
    if isinstance(value, str) and len(value) <= META_VALUE_MAX and value.isprintable():
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return str(value)
    raise BadInput(
        path=filename,
        problem=f"{key}: a value is a string (printable, at most {META_VALUE_MAX} characters) "
        "or a finite number",
    )
