"""benchmarks/bench_graph_view.py runs end to end on short prompts with one repeat, so it
cannot rot (its figures are timings: no assertion on them)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import CHROMIUM, NEEDS_CHROMIUM
from tests.support.benchmark_runs import run_benchmark

pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = NEEDS_CHROMIUM


def test_graph_view_benchmark_draws_one_graph_and_two_side_by_side(tmp_path):
    argv = ["--chars", "16", "--graphs", "2", "--repeats", "1", "--chromium", CHROMIUM]
    out = run_benchmark("bench_graph_view.py", *argv, "--out", str(tmp_path))
    for name, n_pos in (("graph-16", 16), ("graph-32", 32)):
        assert f"{name} ({n_pos} positions):" in out, out
        assert re.search(rf"of {n_pos} positions drawn", out), out
        assert (tmp_path / f"{name}.png").stat().st_size > 0
    assert len(re.findall(r"layout best \d+ ms, median \d+ ms; painted best \d+ ms", out)) == 2
