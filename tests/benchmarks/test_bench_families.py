"""benchmarks/bench_families.py runs end to end in its smoke mode, so it cannot rot; its
checks (logits against Hugging Face, the patching sweep against TransformerLens) pass."""

from __future__ import annotations

import re

from tests.support.benchmark_runs import row_after, run_benchmark


def test_family_benchmark_smoke_mode_prints_every_ratio():
    out = run_benchmark("bench_families.py", "--smoke", "--threads", "1")
    assert "max |interp logits - HF logits| <= 0.001" in out
    assert "Mixtral-shaped (2 layers" in out and "4 experts, top 2): max |interp logits - HF" in out
    assert re.search(
        r"gpt-oss-shaped \(2 layers.*top 2\): max \|interp logits - HF logits\| <= 0\.001", out
    )
    assert re.search(r"the full cache holds (\d+) of \1 hooks", out), out
    labels = [
        "plain forward: interp / HF (sdpa)",
        "run_with_cache, every hook, default glibc malloc: interp / interp forward",
        "run_with_cache, every hook, keep_freed_memory(): interp / interp forward",
        "Mixtral-shaped forward: interp / HF (sdpa)",
        "Mixtral-shaped run_with_cache, every hook: interp / interp forward",
        "gpt-oss-shaped forward: interp / HF (eager)",
        "gpt-oss-shaped run_with_cache, every hook: interp / interp forward",
    ]
    for setting in ("default glibc malloc", "keep_freed_memory()"):
        faults = rf"faults of one call, {re.escape(setting)}: forward [\d,]+, full cache [\d,]+"
        assert re.search(faults, out), out
    if "TransformerLens skipped" not in out:
        assert "max |interp - TransformerLens| <= 0.001" in out
        labels.append("resid_pre patching sweep: TransformerLens / interp (speed-up)")
    for label in labels:
        assert float(row_after(out, label).split()[0]) > 0
