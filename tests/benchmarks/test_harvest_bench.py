"""benchmarks/bench_harvest.py runs end to end in its smoke mode, so it cannot rot."""

from __future__ import annotations

import re

from tests.support.benchmark_runs import row_after, run_benchmark


def test_benchmark_smoke_mode_prints_every_ratio():
    out = run_benchmark("bench_harvest.py", "--smoke", "--repeats", "1")
    labels = [
        "speed, harvest / plain run_with_cache + torch.save loop, default glibc malloc:",
        "speed, harvest / plain run_with_cache + torch.save loop, keep_freed_memory():",
        "speed, harvest last with keep_freed_memory() / default glibc:",
        "speed, plain loop with keep_freed_memory() / default glibc:",
        "time, harvest block 1 / harvest block 11:",
        "speed-up, 2 processes / 1 process (torchrun, gloo):",
    ]
    for label in labels:
        assert float(re.search(r"\d+\.\d+", row_after(out, label)).group()) > 0
    for setting in ("default glibc malloc", "keep_freed_memory()"):
        faults = rf"page faults of one run, {re.escape(setting)}: harvest last [\d,]+; plain"
        assert re.search(faults, out), out
