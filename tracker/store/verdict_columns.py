"""Many jobs' kept verdicts as columns, for the readers across jobs (the claims, the gate's
yardstick): at 10,000 jobs they read a million verdicts, which as Python tuples cost seconds to
make and to walk; as arrays, what every row shares with the same verdict of other jobs (its
``VerdictKey``) is held once, and a row's detail is rebuilt only when asked for."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from tracker.store.verdict_keys import Key, detail, split_detail

# job_id, check, subject, measured, expected, tolerance, status, detail, known
VerdictRow = tuple[int, str, str, float | None, float | None, float | None, str, str, str | None]


@dataclass(frozen=True, eq=False)
class VerdictColumns:
    """Verdict rows as columns, in job id and position order: row ``i`` is of job
    ``job_ids[i]`` and of key ``key_rows[keys[i]]`` (check, subject, expected, status, known,
    detail template); its measured value and tolerance are the arrays' where ``has_measured``
    and ``has_tolerance`` say it has one (a flag as 1.0 / 0.0, text as none), its packed figures
    ``figures[figure_ends[i - 1]:figure_ends[i]]`` where ``has_figures`` says so."""

    job_ids: NDArray[np.int64]
    keys: NDArray[np.intp]
    measured: NDArray[np.float64]
    has_measured: NDArray[np.bool_]
    tolerance: NDArray[np.float64]
    has_tolerance: NDArray[np.bool_]
    figure_ends: NDArray[np.int64]
    has_figures: NDArray[np.bool_]
    figures: bytes
    key_rows: Sequence[Key]

    def __len__(self) -> int:
        return len(self.job_ids)

    def detail(self, i: int) -> str:
        """Row ``i``'s detail, rebuilt from its key's template and its figures."""
        template = self.key_rows[self.keys[i]][5]
        if not self.has_figures[i]:
            return detail(template, None)
        start = int(self.figure_ends[i - 1]) if i else 0
        return detail(template, self.figures[start : int(self.figure_ends[i])])

    def rows(self) -> Iterator[VerdictRow]:
        """The rows as tuples (for a reader of a few jobs)."""
        measured, tolerance = self.measured.tolist(), self.tolerance.tolist()
        for i, (job_id, key) in enumerate(
            zip(self.job_ids.tolist(), self.keys.tolist(), strict=True)
        ):
            check, subject, expected, status, known, _ = self.key_rows[key]
            yield (
                job_id, check, subject, measured[i] if self.has_measured[i] else None, expected,
                tolerance[i] if self.has_tolerance[i] else None, status, self.detail(i), known,
            )  # fmt: skip

    @classmethod
    def of_rows(cls, rows: Sequence[VerdictRow]) -> VerdictColumns:
        """Rows (``kept_rows.verdict_row``s, in job id and position order) as columns."""
        key_rows: dict[Key, int] = {}
        keys, ends, with_figures = [], [], []
        figures = bytearray()
        for _, check, subject, _, expected, _, status, text, known in rows:
            template, packed = split_detail(text)
            key = (check, subject, expected, status, known, template)
            keys.append(key_rows.setdefault(key, len(key_rows)))
            with_figures.append(packed is not None)
            figures += packed or b""
            ends.append(len(figures))
        measured = [row[3] for row in rows]
        tolerance = [row[5] for row in rows]
        return cls(
            job_ids=np.array([row[0] for row in rows], dtype=np.int64),
            keys=np.array(keys, dtype=np.intp),
            measured=_floats(measured),
            has_measured=np.array([v is not None for v in measured], dtype=np.bool_),
            tolerance=_floats(tolerance),
            has_tolerance=np.array([v is not None for v in tolerance], dtype=np.bool_),
            figure_ends=np.array(ends, dtype=np.int64),
            has_figures=np.array(with_figures, dtype=np.bool_),
            figures=bytes(figures),
            key_rows=list(key_rows),
        )


def _floats(values: Sequence[float | None]) -> NDArray[np.float64]:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
