"""benchmarks/bench_distributed.py runs end to end in its smoke mode (torchrun, 2 gloo ranks),
so it cannot rot."""

from __future__ import annotations

import re

from tests.support.benchmark_runs import row_after, run_benchmark


def test_benchmark_smoke_mode_prints_every_figure():
    out = run_benchmark("bench_distributed.py", "--smoke", "--repeats", "1")
    assert (
        float(re.search(r"\d+\.\d+", row_after(out, "forward time, TP / one process:")).group()) > 0
    )
    weights = float(row_after(out, "block weights per rank / whole:").split()[0])
    assert 0.45 < weights <= 0.6
    traffic = row_after(out, "bytes communicated per forward / minimum")
    assert float(re.search(r": (\d+\.\d+)", traffic).group(1)) >= 1.0  # never below the minimum
    assert "gathered hook_z on every block" in out
