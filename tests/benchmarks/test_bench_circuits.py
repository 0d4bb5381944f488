"""benchmarks/bench_circuits.py runs end to end in its smoke mode, so it cannot rot
(circuit-tracer's side needs its own environment: only interp's runs here)."""

from __future__ import annotations

import re

from tests.support.benchmark_runs import row_after, run_benchmark


def test_benchmark_smoke_mode_prints_interp_time_and_memory():
    out = run_benchmark("bench_circuits.py", "--smoke", "--threads", "1")
    assert re.search(r"\d+ active features", row_after(out, "shape: 2x64, 256 features"))
    seconds, growth = re.search(r"([\d.]+) s, memory growth (-?\d+) MiB", out).groups()
    assert float(seconds) > 0 and int(growth) >= 0
