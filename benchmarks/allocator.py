"""What a full cache costs against the forward, with glibc's defaults and with
``interp.utils.malloc_tuning.keep_freed_memory()``: the ratio of best-of-N times and the minor page
faults of one call of each (faults, unlike times, hardly depend on a shared machine's load).

``keep_freed_memory()`` changes the whole process and cannot be undone, so a benchmark measures
its own process's setting and runs itself again, in a child process, for the other one::

    cost = cache_cost(model, tokens, repeats, "cpu")           # this process's setting
    other = cache_cost_in_child(__file__, args, not kept)      # the other, in a child
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from timing import best_times, kernel_cost

from interp.utils import malloc_tuning

COST_LINE = "cache cost:"


def fault_counts(runs: dict[str, Callable[[], Any]]) -> dict[str, int]:
    """Minor page faults of one call of each, in turn (call it after the timed rounds, so
    the process has reached its steady state)."""
    return {name: kernel_cost(run)[0] for name, run in runs.items()}


def memory_setting(keep_freed_memory: bool) -> str:
    """Apply ``--keep-freed-memory`` and say which allocator setting this run has."""
    if keep_freed_memory:
        kept = malloc_tuning.keep_freed_memory()
        return "keep_freed_memory()" if kept else "--keep-freed-memory had no effect"
    return "default glibc malloc"


def add_memory_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--keep-freed-memory``, and ``--cache-cost`` (what the child process runs)."""
    parser.add_argument(
        "--keep-freed-memory",
        action="store_true",
        help="interp.utils.malloc_tuning.keep_freed_memory() first (glibc keeps what it frees)",
    )
    parser.add_argument("--cache-cost", action="store_true", help=argparse.SUPPRESS)
    return parser


def cache_cost(model: Any, tokens: Any, repeats: int, device: str) -> dict[str, float]:
    """A full ``run_with_cache`` against ``model``'s forward: the ratio of best times, and
    (on the CPU) the minor page faults of one call of each."""
    runs = {"forward": lambda: model(tokens), "cache": lambda: model.run_with_cache(tokens)}
    seconds = best_times(runs, repeats, device)
    faults = fault_counts(runs) if device == "cpu" else {"forward": -1, "cache": -1}
    return {
        "ratio": seconds["cache"] / seconds["forward"],
        "forward faults": faults["forward"],
        "cache faults": faults["cache"],
    }


def print_cost(cost: dict[str, float]) -> None:
    """The child's answer, one line its parent reads."""
    print(COST_LINE, json.dumps(cost), flush=True)


def cache_cost_in_child(script: str, argv: list[str], keep: bool) -> dict[str, float]:
    """``cache_cost`` measured by ``script --cache-cost argv`` in a fresh process, with
    ``keep_freed_memory()`` there if ``keep``."""
    command = [sys.executable, script, "--cache-cost", *argv]
    command += ["--keep-freed-memory"] if keep else []
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith(COST_LINE))
    return json.loads(line.removeprefix(COST_LINE))


def cost_lines(costs: dict[str, dict[str, float]]) -> list[str]:
    """One printed line of faults for each setting's cost."""
    return [
        f"  minor page faults of one call, {setting}: forward {cost['forward faults']:,}, "
        f"full cache {cost['cache faults']:,}"
        for setting, cost in costs.items()
    ]
