"""Regenerate the golden files from the REFERENCE analysis script (not from tracker code).

For every case of ``cases.CASES``: write the sample job with
``tracker.sample.write_sample_job`` into a temporary directory, run the reference
``analyze_job2.py <jobdir>`` with a temporary working directory (it writes into
``repro_flashoptim/outputs/job2`` relative to its cwd) and copy its ``mem_analysis.json``
and ``gpt_analysis.json`` unchanged into ``tests/golden/<case>/``.

Usage (from anywhere):
    python tests/golden/make_golden.py [path/to/analyze_job2.py]

The default script path is ``../shared/reference/analyze_job2.py`` relative to the repo root.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(HERE))

from cases import CASES, OUTPUTS, run_reference  # noqa: E402

from tracker.sample import write_sample_job  # noqa: E402


def make_case(name: str, kwargs: dict, script: Path) -> Path:
    dest = HERE / name
    dest.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"golden_{name}_") as tmp:
        job = write_sample_job(Path(tmp) / "job", **kwargs)
        out = run_reference(script, job, Path(tmp) / "cwd")
        for filename in OUTPUTS:
            shutil.copyfile(out / filename, dest / filename)
    return dest


def main(argv: list[str]) -> int:
    default = REPO_ROOT / ".." / "shared" / "reference" / "analyze_job2.py"
    script = Path(argv[1]) if len(argv) > 1 else default
    script = script.resolve()
    if not script.is_file():
        print(f"reference script not found: {script}", file=sys.stderr)
        return 2
    for name, kwargs in CASES.items():
        dest = make_case(name, kwargs, script)
        print(f"{name}: {dest.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
