"""Best-of-N wall times of several contenders, interleaved round by round: what every
benchmark here times with (the machine may be shared and noisy, so only the best time of
each, and only ratios of them, are printed).

    seconds = best_times({"hf": lambda: hf(tokens), "interp": lambda: ours(tokens)}, repeats=5)
    print(f"interp / HF: {seconds['interp'] / seconds['hf']:.3f}")

``kernel_cost`` counts what the kernel did for one call (page faults, system time): unlike
wall time, a shared machine's load hardly changes it.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import torch


def synchronize(device: str) -> None:
    """Wait for the GPU's queued work (a no-op on the CPU), so a clock reading covers it."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def best_times(
    contenders: dict[str, Callable[[], Any]], repeats: int, device: str = "cpu"
) -> dict[str, float]:
    """The best of ``repeats`` wall times of each contender, after one warm-up call each.

    Rounds are interleaved (every contender once per round), so a slow spell of a shared
    machine hits all contenders alike rather than one of them. A call is timed until it
    returns; what it returned is released after the clock stops. Each round is reported on
    stderr.
    """
    for run in contenders.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for round_index in range(repeats):
        for name, run in contenders.items():
            synchronize(device)
            start = time.perf_counter()
            result = run()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
            del result
        print(f"  (timed round {round_index + 1} of {repeats})", file=sys.stderr, flush=True)
    return {name: min(values) for name, values in times.items()}


def kernel_cost(run: Callable[[], Any]) -> tuple[int, float]:
    """Minor page faults and seconds of kernel (system) time of one call of ``run`` (what
    it returned is released after the count)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = run()
    after = resource.getrusage(resource.RUSAGE_SELF)
    del result
    return after.ru_minflt - before.ru_minflt, after.ru_stime - before.ru_stime
