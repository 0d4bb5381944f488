"""benchmarks/gpu_check.py: without CUDA it says so and exits 0; its dry run on the CPU runs
every check, and the fp32 parity and generation it reports hold for every family case."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.loading.test_families_parity import CASES

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=900
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_so_and_exits_cleanly():
    done = run()
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("gpu_check: no CUDA device here")


def test_cpu_dry_run_reports_every_case():
    done = run("--device", "cpu", "--quick")
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: a bf16 gap looser than HF's
    summary = done.stdout.split("summary")[-1]
    for name in CASES:
        row = re.search(rf"{re.escape(name)}\s+fp32 (\S+) \|.*\| generate (\w+)", summary)
        assert row is not None, f"no row for {name} in:\n{summary}"
        assert float(row.group(1)) <= 1e-4 and row.group(2) == "same", row.group(0)
    assert summary.count("plain forward: interp / HF (sdpa)") == 2  # fp32 and bf16
    over_devices = summary.split("layers over devices")[1].splitlines()[1:4]
    assert all(row.startswith("  ok ") and "generate same" in row for row in over_devices)
    assert summary.rstrip().splitlines()[-1].startswith(("ALL OK", "SOME CHECKS FAILED"))
