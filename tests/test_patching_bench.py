"""The patching benchmark's smoke mode runs (tiny shapes, seconds), so the benchmark cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_patching.py"


def test_benchmark_smoke_mode_runs_and_agrees_with_transformer_lens():
    completed = subprocess.run(
        [sys.executable, str(BENCHMARK), "--smoke", "--threads", "1", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = [line for line in completed.stdout.splitlines() if "TransformerLens" in line]
    assert len(lines) == 2 and all("max |diff|" in line for line in lines)
