"""The patching benchmark's smoke mode runs (tiny shapes, seconds), so the benchmark cannot rot."""

from __future__ import annotations

from tests.support.benchmark_runs import run_benchmark


def test_benchmark_smoke_mode_runs_and_agrees_with_transformer_lens():
    out = run_benchmark(
        "bench_patching.py", "--smoke", "--threads", "1", "--repeats", "1", timeout=300
    )
    lines = [line for line in out.splitlines() if "TransformerLens" in line]
    assert len(lines) == 2 and all("max |diff|" in line for line in lines)
    exact_lines = [line for line in out.splitlines() if "exact=True" in line]
    assert len(exact_lines) == 2 and all("of the gap" in line for line in exact_lines)
