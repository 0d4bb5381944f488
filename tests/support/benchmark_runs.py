"""Running a script of benchmarks/ from a test (its smoke mode, so it cannot rot), and reading
the figure on one of the rows it printed.

    out = run_benchmark("bench_model.py", "--smoke", "--threads", "1")
    assert float(row_after(out, "plain forward: interp / HF (sdpa)").split()[0]) > 0
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_benchmark(script: str, *argv: str, timeout: float = 600) -> str:
    """What ``python benchmarks/<script> *argv`` printed; the end of its stderr fails the test
    when it exits with an error."""
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def row_after(out: str, label: str) -> str:
    """The rest of the first printed line that holds ``label``, after the label."""
    row = next((line for line in out.splitlines() if label in line), None)
    assert row is not None, f"no row {label!r} in:\n{out}"
    return row.split(label, 1)[1]
