"""benchmarks/bench_circuits.py runs end to end in its smoke mode, so it cannot rot
(circuit-tracer's side needs its own environment: only interp's runs here, and a missing
environment is skipped with a message)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.benchmark_runs import BENCHMARKS, row_after, run_benchmark


def test_benchmark_smoke_mode_prints_interp_time_and_memory():
    out = run_benchmark(
        "bench_circuits.py", "--smoke", "--threads", "1", "--circuit-tracer", "none"
    )
    assert re.search(r"\d+ active features", row_after(out, "shape: 2x64, 256 features"))
    seconds, growth = re.search(r"([\d.]+) s, memory growth (-?\d+) MiB", out).groups()
    assert float(seconds) > 0 and int(growth) >= 0


def test_context_sweep_prints_dense_and_sparse_rows_and_skips_a_missing_peer():
    argv = ["--smoke", "--sweep", "8", "--circuit-tracer", "/nonexistent/bin/python"]
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_circuits.py"), *argv],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "circuit-tracer skipped: no Python at /nonexistent/bin/python" in done.stderr
    row = row_after(done.stdout, "     8 tokens (")
    # Both sides timed (an 8-token graph may print 0.0 s: the figures, not their size).
    assert re.search(r"dense [\d.]+ s.*\| sparse [\d.]+ s", row), row
    assert "circuit-tracer -" in row  # not run
