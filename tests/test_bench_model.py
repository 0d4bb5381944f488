"""benchmarks/bench_model.py runs end to end in its smoke mode, so it cannot rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_model.py"


def test_benchmark_smoke_mode_prints_every_ratio():
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--smoke", "--threads", "1", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "greedy tokens identical to HF generate: True" in out
    assert "max |interp logits - HF logits| <= 0.001" in out
    labels = [
        "plain forward: interp / HF (sdpa)",
        "run_with_cache, every hook: interp / interp forward",
        "run_with_cache, blocks.1.hook_resid_post only: interp / interp forward",
        "generate 8 tokens (greedy, KV cache): interp / HF generate",
        "forward FLOP/s / fp32 matmul peak: interp",
    ]
    if "TransformerLens skipped" not in out:
        labels += ["plain forward: TransformerLens / HF (sdpa)", "cache bytes, every hook"]
    for label in labels:
        row = next((line for line in out.splitlines() if label in line), None)
        assert row is not None, f"no row {label!r} in:\n{out}"
        value = float(re.search(r"\s(\d+\.\d+)\s", row[len(label) :]).group(1))
        assert value > 0
