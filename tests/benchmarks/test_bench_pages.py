"""benchmarks/bench_pages.py runs end to end with one repeat, so it cannot rot (its figures
are timings: no assertion on them)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import CHROMIUM, NEEDS_CHROMIUM
from tests.support.benchmark_runs import run_benchmark

pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = NEEDS_CHROMIUM


def test_page_benchmark_measures_the_report_and_the_dashboard():
    out = run_benchmark("bench_pages.py", "--repeats", "1", "--chromium", CHROMIUM)
    weight = float(re.search(r"weight ([\d.]+) MB", out).group(1))
    assert 0.5 < weight < 2.5  # the report and the scripts it loads (a size, not a time)
    for label in ("open until every view is drawn", "first load until ready", "head click"):
        assert re.search(rf"{label}.*: best [\d.]+ s, median [\d.]+ s", out), out
