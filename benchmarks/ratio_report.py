"""The command line and the printed table of the ratio benchmarks (``bench_model``,
``bench_families``): the options they share, and rows of ``label, ratio, target`` printed
with whether each ratio meets its target.

    parser = ratio_parser(__doc__.split("\\n\\n")[0])
    args = parse_ratio_args(parser, argv)
    print_ratio_table([("plain forward: interp / HF", 0.98, "<= 1.0")], "ratio", False, print)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch


def ratio_parser(description: str) -> argparse.ArgumentParser:
    """A parser with the options every ratio benchmark takes: --device, --dtype, --smoke,
    --threads and --repeats."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--dtype", default="float32", help="float32 (default) or bfloat16")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, a few seconds")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds (default 5)")
    return parser


def parse_ratio_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``argv``'s options; a usage error when --device cuda has no GPU to run on."""
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA GPU, and torch.cuda.is_available() is False.")
    return args


def printer(lines: list[str]) -> Callable[[str], None]:
    """``say(line)``: prints the line at once (flushed) and keeps it in ``lines``, which the
    benchmark returns (gpu_check gathers them into its summary)."""

    def say(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    return say


def ratio_line(label: str, value: float, target: str) -> str:
    """One printed row: the ratio, and the target it is held to (``"<= 1.05"``), if any."""
    verdict = ""
    if target:
        verdict = "meets" if value <= float(target.removeprefix("<=")) else "MISSES"
    return f"  {label:<72} {value:6.3f}  {target:<7} {verdict}"


def print_ratio_table(
    rows: list[tuple[str, float, str]], header: str, smoke: bool, say: Callable[[str], None]
) -> None:
    """The header and a line for each row, through ``say``; in smoke mode the targets are not
    checked (tiny shapes say nothing about speed)."""
    say(f"  {header:<72} value  target")
    for label, value, target in rows:
        say(ratio_line(label, value, "" if smoke else target))
    if smoke:
        say("  (smoke mode: tiny shapes, so the timings say nothing; targets are not checked)")
