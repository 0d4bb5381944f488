"""benchmarks/bench_serve.py runs end to end in its smoke mode, so it cannot rot."""

from __future__ import annotations

import re

from tests.support.benchmark_runs import run_benchmark


def test_load_benchmark_smoke_mode_serves_every_request():
    out = run_benchmark("bench_serve.py", "--smoke")
    assert "2 clients, 30 requests in" in out
    assert "errors: 0" in out
    row = next(line for line in out.splitlines() if line.startswith("all but patch"))
    p50, p95 = map(float, row.split()[-2:])
    assert 0 < p50 <= p95
    assert re.search(r"RSS: \d+ MB after warm-up, \d+ MB at the end", out)
