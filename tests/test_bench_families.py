"""benchmarks/bench_families.py runs end to end in its smoke mode, so it cannot rot; its
checks (logits against Hugging Face, the patching sweep against TransformerLens) pass."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_families.py"


def test_family_benchmark_smoke_mode_prints_every_ratio():
    done = subprocess.run(
        [sys.executable, str(BENCHMARK), "--smoke", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "max |interp logits - HF logits| <= 0.001" in out
    assert re.search(r"the full cache holds (\d+) of \1 hooks", out), out
    labels = [
        "plain forward: interp / HF (sdpa)",
        "run_with_cache, every hook: interp / interp forward",
    ]
    if "TransformerLens skipped" not in out:
        assert "max |interp - TransformerLens| <= 0.001" in out
        labels.append("resid_pre patching sweep: TransformerLens / interp (speed-up)")
    for label in labels:
        row = next((line for line in out.splitlines() if label in line), None)
        assert row is not None, f"no row {label!r} in:\n{out}"
        assert float(row.split(label, 1)[1].split()[0]) > 0
