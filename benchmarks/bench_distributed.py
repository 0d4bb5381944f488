"""Tensor parallel over 2 ranks (torchrun, gloo, one thread each) against one process (two
threads) on the same CPU machine, on a GPT-2-shaped random checkpoint:

- forward time, TP / one process with two threads and with one (best-of-N wall clock; the
  ranks meet at a barrier before each forward, which the time includes);
- per-rank block weights against the whole model's (about 1/N);
- bytes communicated per forward (the payload of every collective: the all-reduces after
  attention and MLP, the input check's digest) against the minimum, two all-reduces of
  [batch, pos, d_model] per block;
- the cost of a gathered per-head hook (a read-only hook on every block's ``hook_z``): time
  and bytes, against the same forward without it (and the same hook in one process).

    python benchmarks/bench_distributed.py            # 6 layers, d_model 512, CPU
    python benchmarks/bench_distributed.py --smoke    # tiny shapes, seconds (run by the tests)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from timing import best_times

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {
    "default": dict(n_layer=6, n_embd=512, n_head=8, vocab_size=8192, batch=4, pos=128),
    "smoke": dict(n_layer=2, n_embd=64, n_head=4, vocab_size=256, batch=2, pos=16),
}


def checkpoint(shape: dict, folder: Path) -> Path:
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=shape["n_layer"],
        n_embd=shape["n_embd"],
        n_head=shape["n_head"],
        vocab_size=shape["vocab_size"],
        n_positions=shape["pos"],
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


def tokens_of(shape: dict) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    size = (shape["batch"], shape["pos"])
    return torch.randint(shape["vocab_size"], size, generator=generator)


def block_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.blocks.parameters())


def hook_z_hooks(model) -> list:
    return [
        (f"blocks.{layer}.attn.hook_z", lambda z, hook: None) for layer in range(model.cfg.n_layers)
    ]


class Traffic:
    """The payload bytes of every all-reduce and all-gather while counting."""

    def __init__(self) -> None:
        import torch.distributed as dist

        self.bytes = 0
        self.calls = 0
        original_reduce, original_gather = dist.all_reduce, dist.all_gather

        def all_reduce(tensor, *args, **kwargs):
            self.bytes += tensor.numel() * tensor.element_size()
            self.calls += 1
            return original_reduce(tensor, *args, **kwargs)

        def all_gather(parts, tensor, *args, **kwargs):
            self.bytes += tensor.numel() * tensor.element_size()
            self.calls += 1
            return original_gather(parts, tensor, *args, **kwargs)

        dist.all_reduce, dist.all_gather = all_reduce, all_gather

    def of(self, run) -> tuple[int, int]:
        self.bytes = self.calls = 0
        run()
        return self.bytes, self.calls


def worker(folder: str, shape_name: str, repeats: int, out: str) -> None:
    """One rank: its block bytes, the traffic and the times of a forward, with and without
    the gathered hook."""
    import torch.distributed as dist

    from interp import HookedTransformer

    torch.set_num_threads(1)
    shape = SHAPES[shape_name]
    model = HookedTransformer.from_pretrained_no_processing(folder, tp_size=2)
    tokens = tokens_of(shape)
    traffic = Traffic()
    with torch.no_grad():
        plain_bytes, plain_calls = traffic.of(lambda: model(tokens))
        hooked_bytes, hooked_calls = traffic.of(
            lambda: model.run_with_hooks(tokens, fwd_hooks=hook_z_hooks(model))
        )

        def plain():
            dist.barrier()
            return model(tokens)

        def hooked():
            dist.barrier()
            return model.run_with_hooks(tokens, fwd_hooks=hook_z_hooks(model))

        times = best_times({"plain": plain, "hooked": hooked}, repeats)
    if dist.get_rank() == 0:
        result = dict(
            block_bytes=block_bytes(model),
            plain_bytes=plain_bytes,
            plain_calls=plain_calls,
            hooked_bytes=hooked_bytes,
            hooked_calls=hooked_calls,
            times=times,
        )
        Path(out).write_text(json.dumps(result))
    dist.barrier()  # both ranks done before either tears the group down
    dist.destroy_process_group()


def launch(folder: Path, shape_name: str, repeats: int, out: Path) -> None:
    with __import__("socket").socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc-per-node=2",
        "--master-addr=127.0.0.1",
        f"--master-port={port}",
        __file__,
        "--worker",
        str(out),
        "--folder",
        str(folder),
        "--shape",
        shape_name,
        "--repeats",
        str(repeats),
    ]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    if done.returncode != 0:
        raise SystemExit(f"torchrun failed:\n{done.stderr[-4000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, seconds")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--shape", default="default", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.folder, args.shape, args.repeats, args.worker)
        return
    shape_name = "smoke" if args.smoke else "default"
    shape = SHAPES[shape_name]
    from interp import HookedTransformer

    with tempfile.TemporaryDirectory() as tmp:
        folder = checkpoint(shape, Path(tmp) / "gpt2")
        launch(folder, shape_name, args.repeats, Path(tmp) / "tp.json")
        tp = json.loads((Path(tmp) / "tp.json").read_text())
        torch.set_num_threads(2)  # as many threads as the two ranks together
        model = HookedTransformer.from_pretrained_no_processing(folder)
    tokens = tokens_of(shape)

    def on_threads(n_threads: int, run):
        def timed():
            torch.set_num_threads(n_threads)
            return run()

        return timed

    with torch.no_grad():
        one = best_times(
            {
                "plain": on_threads(2, lambda: model(tokens)),
                "hooked": on_threads(
                    2, lambda: model.run_with_hooks(tokens, fwd_hooks=hook_z_hooks(model))
                ),
                "one thread": on_threads(1, lambda: model(tokens)),
            },
            args.repeats,
        )
    minimum = 2 * shape["n_layer"] * shape["batch"] * shape["pos"] * shape["n_embd"] * 4
    print(
        f"GPT-2 shape: {shape['n_layer']} layers, d_model {shape['n_embd']}, {shape['n_head']} "
        f"heads; tokens [{shape['batch']}, {shape['pos']}]; 2 ranks (gloo, 1 thread each) vs "
        "1 process (2 threads)"
    )
    print(
        f"forward time, TP / one process: {tp['times']['plain'] / one['plain']:.2f} "
        f"(2 threads), {tp['times']['plain'] / one['one thread']:.2f} (1 thread)"
    )
    print(f"block weights per rank / whole: {tp['block_bytes'] / block_bytes(model):.3f}")
    print(
        f"bytes communicated per forward / minimum (2 all-reduces of [batch, pos, d_model] a "
        f"block): {tp['plain_bytes'] / minimum:.3f} ({tp['plain_bytes']:,} bytes in "
        f"{tp['plain_calls']} collectives; minimum {minimum:,})"
    )
    print(
        f"gathered hook_z on every block, time with / without: TP "
        f"{tp['times']['hooked'] / tp['times']['plain']:.2f}, one process "
        f"{one['hooked'] / one['plain']:.2f}; bytes with / without: "
        f"{tp['hooked_bytes'] / tp['plain_bytes']:.2f} ({tp['hooked_calls']} collectives)"
    )


if __name__ == "__main__":
    main()
