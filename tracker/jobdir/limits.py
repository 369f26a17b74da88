"""What no real job holds: the limits a job directory's files are refused beyond, in one place.

Each limit is checked before the file is read whole (its size, its header, its records as
they are counted), so a hostile or broken file costs at most a small multiple of the part
read before the refusal. docs/reliability.md ("Limits") lists them with their tests.
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# A 10M-step arm with a few metrics is ~0.5 GB of CSV; 2 GiB leaves room for four times that.
MAX_FILE_SIZE = 2 * GIB
METRIC_COLUMNS_MAX = 1_000  # besides ``step``; real logs have a few dozen at most
CSV_FIELD_MAX = 131_072  # characters of one CSV field: Python's csv module's default limit
CSV_HEADER_MAX = 1 * MIB  # 1,001 names of at most 200 characters fit with room to spare
PROBE_RECORDS_MAX = 100_000  # a memory sweep probes a few hundred (model, variant) pairs
PROBE_RECORD_MAX = 1 * MIB  # characters of one probe record (a JSON line, a list element)
ARM_SUMMARY_MAX = 64 * MIB  # characters of an arm's summary JSON: a few numbers, any extras
READ_BLOCK = 1 * MIB  # files are read, checked and hashed in blocks of this size


def size_text(size: int) -> str:
    """A byte count as people write it: ``2 GiB``, ``512 MiB``, ``1234 bytes``."""
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"
