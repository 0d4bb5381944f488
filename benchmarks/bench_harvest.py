"""Speed of ``interp.harvest`` as ratios, on a GPT-2-small-shaped random model.

- harvesting the last block's residual stream (tokens/s) against the loop people write by
  hand: ``run_with_cache(tokens, names_filter=hook)`` and ``torch.save`` per batch; both with
  glibc's defaults and with ``interp.utils.malloc_tuning.keep_freed_memory()`` (what ``interp
  harvest`` applies; the other setting in a child process, see ``allocator.py``), with the
  minor page faults of one run of each;
- harvesting block 1 of 12 against harvesting the last block (the forward stops at the
  deepest hook, so block 1 should cost at most 0.25x);
- two processes under ``torchrun`` (gloo, one thread each) against one process (as many
  threads as the machine has), both harvesting the same shards.

Times are best-of-N wall clock, interleaved round by round; only ratios are printed. The data
are random token ids (.npy), so tokenising costs nothing here. SAELens's
``CacheActivationsRunner`` is not compared: sae-lens needs TransformerLens 2.x, and this
environment has 4.x.

    python benchmarks/bench_harvest.py                 # GPT-2-small shape, CPU
    python benchmarks/bench_harvest.py --device cuda   # on a GPU (pinned buffers, async copies)
    python benchmarks/bench_harvest.py --smoke         # tiny shapes, seconds (run by the tests)
    python benchmarks/bench_harvest.py --keep-freed-memory   # glibc keeps freed memory (opt-in)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from allocator import (
    add_memory_options,
    cache_cost_in_child,
    fault_counts,
    memory_setting,
    print_cost,
)
from timing import best_times

import interp
from interp.harvest import harvest


@dataclass(frozen=True)
class Shape:
    n_layers: int
    d_model: int
    n_heads: int
    d_vocab: int
    seq_len: int
    n_sequences: int
    batch_size: int
    description: str


FULL = Shape(12, 768, 12, 50257, 128, 64, 8, "GPT-2-small shape, 64 x 128 tokens")
SMOKE = Shape(12, 32, 4, 512, 16, 16, 4, "smoke: 12 tiny layers, 16 x 16 tokens")


def build_model(shape: Shape, device: str) -> interp.HookedTransformer:
    torch.manual_seed(0)
    cfg = interp.HookedTransformerConfig(
        n_layers=shape.n_layers,
        d_model=shape.d_model,
        n_heads=shape.n_heads,
        d_head=shape.d_model // shape.n_heads,
        d_mlp=4 * shape.d_model,
        d_vocab=shape.d_vocab,
        n_ctx=max(shape.seq_len, 64),
        act_fn="gelu_new",
        device=device,
    )
    return interp.HookedTransformer(cfg).eval()


def write_data(shape: Shape, folder: Path) -> Path:
    rng = np.random.default_rng(0)
    path = folder / "tokens.npy"
    np.save(path, rng.integers(0, shape.d_vocab, (shape.n_sequences, shape.seq_len)))
    return path


def plain_loop(model, data: Path, hook: str, batch_size: int, out: Path) -> None:
    """What people write by hand: run_with_cache and torch.save, batch after batch."""
    rows = torch.from_numpy(np.load(data))
    out.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        for index, start in enumerate(range(0, len(rows), batch_size)):
            tokens = rows[start : start + batch_size].to(model.cfg.device)
            _, cache = model.run_with_cache(tokens, names_filter=hook)
            torch.save(cache[hook].cpu(), out / f"batch_{index}.pt")


def in_fresh_folder(run: Callable[[Path], object]) -> Callable[[], tempfile.TemporaryDirectory]:
    """``run`` writing to a fresh path in a new temporary folder; the folder is returned, so
    it is deleted when best_times releases it, after the clock stops."""

    def call() -> tempfile.TemporaryDirectory:
        folder = tempfile.TemporaryDirectory()
        run(Path(folder.name) / "out")
        return folder

    return call


def harvest_costs(
    runs: dict[str, Callable[[Path], object]], repeats: int, device: str
) -> dict[str, float]:
    """Best-of-N seconds of each run (a harvest, the plain loop) and, on the CPU, the minor
    page faults of one more run of each (``NAME faults``)."""
    contenders = {name: in_fresh_folder(run) for name, run in runs.items()}
    costs = best_times(contenders, repeats, device)
    if device == "cpu":
        faults = fault_counts(contenders)
        costs |= {f"{name} faults": count for name, count in faults.items()}
    return costs


def worker(args: argparse.Namespace) -> None:
    """One torchrun process: build the model, harvest, rank 0 prints the harvest's seconds."""
    import torch.distributed as dist

    shape = SMOKE if args.smoke else FULL
    model = build_model(shape, args.device)
    dist.init_process_group("gloo")
    with torch.no_grad():  # warm up, as the in-process timings are warmed up
        model(torch.zeros(1, shape.seq_len, dtype=torch.long, device=args.device))
    dist.barrier()
    start = time.perf_counter()
    harvest(
        model,
        args.data,
        f"blocks.{shape.n_layers - 1}.hook_resid_post",
        args.out,
        batch_size=shape.batch_size,
        shard_tokens=shape.seq_len * shape.batch_size,
        progress=False,
    )
    if dist.get_rank() == 0:
        print(f"seconds {time.perf_counter() - start:.6f}")
    dist.destroy_process_group()


def torchrun_seconds(n_procs: int, args: argparse.Namespace, data: Path, out: Path) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, os.cpu_count() // n_procs))}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(n_procs),
        __file__,
        "--worker",
        "--data",
        str(data),
        "--out",
        str(out),
        "--device",
        args.device,
        *(["--smoke"] if args.smoke else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return float(done.stdout.split("seconds")[-1].split()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, a few seconds")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    add_memory_options(parser)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    shape = SMOKE if args.smoke else FULL
    allocator = memory_setting(args.keep_freed_memory)
    if not args.cache_cost:
        print(
            f"bench_harvest: {shape.description}, batch {shape.batch_size}, {args.device}, "
            f"{torch.get_num_threads()} threads, best of {args.repeats}, {allocator}"
        )
    model = build_model(shape, args.device)
    last, first = f"blocks.{shape.n_layers - 1}.hook_resid_post", "blocks.1.hook_resid_post"
    with tempfile.TemporaryDirectory() as folder:
        data = write_data(shape, Path(folder))
        options = dict(
            batch_size=shape.batch_size,
            progress=False,
            shard_tokens=shape.seq_len * shape.batch_size * 2,
        )
        runs = {
            "harvest last": lambda out: harvest(model, data, last, out, **options),
            "harvest block 1": lambda out: harvest(model, data, first, out, **options),
            "plain loop": lambda out: plain_loop(model, data, last, shape.batch_size, out),
        }
        if args.cache_cost:  # the child process of cache_cost_in_child
            mine = {name: runs[name] for name in ("harvest last", "plain loop")}
            print_cost(harvest_costs(mine, args.repeats, args.device))
            return
        times = harvest_costs(runs, args.repeats, args.device)
        kept = args.keep_freed_memory
        other = memory_setting(False) if kept else "keep_freed_memory()"
        settings = {allocator: times}
        if args.device == "cpu":  # keep_freed_memory() cannot be undone: the other in a child
            argv = ["--device", args.device, "--repeats", str(args.repeats)]
            argv += ["--smoke"] if args.smoke else []
            settings[other] = cache_cost_in_child(__file__, argv, keep=not kept)
        tokens = shape.n_sequences * shape.seq_len
        print(f"harvest tokens/s, last block ({allocator}): {tokens / times['harvest last']:.0f}")
        print(f"plain loop tokens/s, last block ({allocator}): {tokens / times['plain loop']:.0f}")
        for setting, cost in settings.items():
            ratio = cost["plain loop"] / cost["harvest last"]
            print(
                f"speed, harvest / plain run_with_cache + torch.save loop, {setting}: {ratio:.3f}"
            )
        if args.device == "cpu":
            default, keep = (settings[memory_setting(False)], settings["keep_freed_memory()"])
            for name in ("harvest last", "plain loop"):
                gain = default[name] / keep[name]
                print(f"speed, {name} with keep_freed_memory() / default glibc: {gain:.3f}")
            for setting, cost in settings.items():
                counts = "; ".join(
                    f"{name} {cost[f'{name} faults']:,}" for name in ("harvest last", "plain loop")
                )
                print(f"minor page faults of one run, {setting}: {counts}")
        ratio = times["harvest block 1"] / times["harvest last"]
        print(
            f"time, harvest block 1 / harvest block {shape.n_layers - 1}: {ratio:.3f} "
            f"(target <= 0.25: {'met' if ratio <= 0.25 else 'NOT met'})"
        )
        rounds = range(1 if args.smoke else 2)
        one = min(torchrun_seconds(1, args, data, Path(folder) / f"one{i}") for i in rounds)
        two = min(torchrun_seconds(2, args, data, Path(folder) / f"two{i}") for i in rounds)
        print(f"speed-up, 2 processes / 1 process (torchrun, gloo): {one / two:.3f}")


if __name__ == "__main__":
    main()
