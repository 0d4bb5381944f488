"""benchmarks/bench_serve.py runs end to end in its smoke mode, so it cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_serve.py"


def test_load_benchmark_smoke_mode_serves_every_request():
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--smoke"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "2 clients, 30 requests in" in out
    assert "errors: 0" in out
    row = next(line for line in out.splitlines() if line.startswith("all but patch"))
    p50, p95 = map(float, row.split()[-2:])
    assert 0 < p50 <= p95
    assert re.search(r"RSS: \d+ MB after warm-up, \d+ MB at the end", out)
