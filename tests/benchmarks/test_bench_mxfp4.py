"""benchmarks/bench_mxfp4.py runs (smoke size): MXFP4 experts kept hold fewer bytes than
dequantized ones, and their logits are bit-equal."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_mxfp4.py"


def test_smoke_run_reports_ratios_and_bit_equal_logits():
    spec = importlib.util.spec_from_file_location("bench_mxfp4", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    lines = bench.main(["--smoke"])
    resident = re.search(r"resident bytes of the model: .* = ([\d.]+)x", "\n".join(lines))
    assert resident is not None and float(resident.group(1)) < 1
    assert any("peak rise of a forward" in line for line in lines)
    assert lines[-1].strip() == "logits bit-equal"
