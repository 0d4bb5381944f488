"""benchmarks/bench_harvest.py runs end to end in its smoke mode, so it cannot rot."""

from __future__ import annotations

import re

from tests.benchmark_runs import row_after, run_benchmark


def test_benchmark_smoke_mode_prints_every_ratio():
    out = run_benchmark("bench_harvest.py", "--smoke", "--repeats", "1")
    labels = [
        "speed, harvest / plain run_with_cache + torch.save loop:",
        "the same, storage pool off in both:",
        "speed, harvest last with the storage pool / without:",
        "time, harvest block 1 / harvest block 11:",
        "speed-up, 2 processes / 1 process (torchrun, gloo):",
    ]
    for label in labels:
        assert float(re.search(r"\d+\.\d+", row_after(out, label)).group()) > 0
    assert re.search(r"minor page faults of one run: harvest block 1 [\d,]+;", out), out
