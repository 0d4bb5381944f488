"""benchmarks/bench_harvest.py runs end to end in its smoke mode, so it cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_harvest.py"


def test_benchmark_smoke_mode_prints_every_ratio():
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--smoke", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    labels = [
        "speed, harvest / plain run_with_cache + torch.save loop:",
        "time, harvest block 1 / harvest block 11:",
        "speed-up, 2 processes / 1 process (torchrun, gloo):",
    ]
    for label in labels:
        row = next((line for line in done.stdout.splitlines() if label in line), None)
        assert row is not None, f"no row {label!r} in:\n{done.stdout}"
        assert float(re.search(r"\d+\.\d+", row[len(label) :]).group()) > 0
