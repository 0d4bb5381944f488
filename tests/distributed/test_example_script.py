"""examples/tensor_parallel.py runs under torchrun with 2 CPU ranks (gloo), as the README
shows it."""

from __future__ import annotations

from tests.distributed.launch import ROOT, torchrun


def test_the_example_runs_under_torchrun_with_two_cpu_ranks():
    done = torchrun(ROOT / "examples" / "tensor_parallel.py")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    lines = done.stdout.splitlines()
    assert sum(line.startswith("tp_size=2: rank 0 holds") for line in lines) == 1  # rank 0 only
    assert any(line.startswith("greedy continuation [") for line in lines)
