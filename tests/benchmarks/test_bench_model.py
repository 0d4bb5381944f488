"""benchmarks/bench_model.py runs end to end in its smoke mode, so it cannot rot."""

from __future__ import annotations

import re

from tests.support.benchmark_runs import row_after, run_benchmark


def test_benchmark_smoke_mode_prints_every_ratio():
    out = run_benchmark("bench_model.py", "--smoke", "--threads", "1", "--repeats", "1")
    assert "greedy tokens identical to HF generate: True" in out
    assert "max |interp logits - HF logits| <= 0.001" in out
    for setting in ("default glibc malloc", "keep_freed_memory()"):
        faults = rf"faults of one call, {re.escape(setting)}: forward [\d,]+, full cache [\d,]+"
        assert re.search(faults, out), out
    labels = [
        "plain forward: interp / HF (sdpa)",
        "run_with_cache, every hook, default glibc malloc: interp / interp forward",
        "run_with_cache, every hook, keep_freed_memory(): interp / interp forward",
        "run_with_cache, blocks.1.hook_resid_post only: interp / interp forward",
        "generate 8 tokens (greedy, KV cache): interp / HF generate",
        "forward FLOP/s / fp32 matmul peak: interp",
    ]
    if "TransformerLens skipped" not in out:
        labels += ["plain forward: TransformerLens / HF (sdpa)", "cache bytes, every hook"]
    for label in labels:
        value = float(re.search(r"\s(\d+\.\d+)\s", row_after(out, label)).group(1))
        assert value > 0
