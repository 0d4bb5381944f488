"""Speed and memory of interp's forward, ``run_with_cache`` and ``generate``, as ratios.

One process builds one set of random GPT-2 weights three ways: interp's ``HookedTransformer``,
Hugging Face ``transformers``' ``GPT2LMHeadModel`` (``attn_implementation="sdpa"``) and
TransformerLens 4.x's ``TransformerBridge`` (booted offline from the same weights saved to a
temporary folder). It times them side by side, interleaved round by round, and prints only
ratios of best-of-N times (the machine may be shared and noisy), never absolute figures:

- the plain forward (logits), against Hugging Face's;
- ``run_with_cache`` of every hook, and of one early hook (``blocks.1.hook_resid_post``),
  against each library's own plain forward; interp's full cache with glibc's defaults and
  with ``interp.utils.malloc_tuning.keep_freed_memory()`` (the other setting in a child process,
  see ``allocator.py``), and the minor page faults of one call of each;
- greedy generation of 64 tokens with the key/value cache, against Hugging Face's ``generate``;
- the bytes a full cache holds, against TransformerLens's;
- the forward's achieved FLOP/s as a fraction of this machine's fp32 matmul peak, measured in
  the same run with a large matrix multiply.

Everything runs under ``torch.no_grad()``. Usage::

    python benchmarks/bench_model.py                 # GPT-2-small shape, fp32, CPU, batch 4 x 256
    python benchmarks/bench_model.py --device cuda   # the same on a GPU
    python benchmarks/bench_model.py --smoke         # tiny shapes, a few seconds (run by the tests)
    python benchmarks/bench_model.py --keep-freed-memory   # glibc keeps freed memory (opt-in)
"""

from __future__ import annotations

import os

# TransformerLens boots from a local folder; nothing may reach the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse  # noqa: E402
import logging  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Iterable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from allocator import (  # noqa: E402
    add_memory_options,
    cache_cost,
    cache_cost_in_child,
    cost_lines,
    fault_counts,
    memory_setting,
    print_cost,
)
from ratio_report import parse_ratio_args, print_ratio_table, printer, ratio_parser  # noqa: E402
from timing import best_times, synchronize  # noqa: E402
from torch import Tensor  # noqa: E402

from interp.loading.hf import from_hf_model  # noqa: E402

EARLY_HOOK = "blocks.1.hook_resid_post"


@dataclass(frozen=True)
class Shape:
    """The model and workload sizes of one benchmark run."""

    n_layers: int
    d_model: int
    n_heads: int
    d_vocab: int
    n_ctx: int
    batch: int
    pos: int
    prompt_pos: int  # the generation prompt's length
    new_tokens: int  # tokens generated after it
    matmul_size: int  # side of the square matmul that measures the peak
    description: str


FULL = Shape(12, 768, 12, 50257, 1024, 4, 256, 32, 64, 3072, "GPT-2-small shape")
SMOKE = Shape(2, 64, 4, 512, 128, 2, 16, 8, 8, 256, "smoke (tiny) shape")


# ------------------------------------------------------------------------------- models
def build_hf(shape: Shape, device: str, dtype: torch.dtype) -> transformers.GPT2LMHeadModel:
    """A random-weight GPT-2 in eval mode using torch's scaled_dot_product_attention."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=shape.n_layers,
        n_embd=shape.d_model,
        n_head=shape.n_heads,
        vocab_size=shape.d_vocab,
        n_positions=shape.n_ctx,
        bos_token_id=shape.d_vocab - 1,
        eos_token_id=shape.d_vocab - 1,
        attn_implementation="sdpa",
    )
    return transformers.GPT2LMHeadModel(config).to(device=device, dtype=dtype).eval()


def build_transformer_lens(
    hf_model: transformers.GPT2LMHeadModel, folder: str, device: str, dtype: torch.dtype
) -> tuple[Any, str]:
    """TransformerLens's bridge over the same weights, or None and the reason it cannot boot."""
    try:
        from transformer_lens.model_bridge import TransformerBridge

        hf_model.save_pretrained(folder)
        logging.getLogger("transformers").setLevel(logging.ERROR)
        bridge = TransformerBridge.boot_transformers(folder, device=device, dtype=dtype)
        return bridge.eval(), ""
    except Exception as error:  # any failure to boot offline is reported, not fatal
        return None, f"{type(error).__name__}: {error}"


# ------------------------------------------------------------------------------ timing
def square_matmul(size: int, device: str) -> Callable[[], Tensor]:
    """A [size, size] @ [size, size] fp32 matmul (2 * size**3 FLOPs), to measure the peak."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    return lambda: a @ b


def forward_flops(shape: Shape) -> float:
    """Multiply-add FLOPs of one forward: the dense layers for every token, plus causal
    attention (each query against the keys up to it, scores and values)."""
    tokens = shape.batch * shape.pos
    d, d_mlp = shape.d_model, 4 * shape.d_model
    dense_per_token = shape.n_layers * (4 * d * d + 2 * d * d_mlp) + d * shape.d_vocab
    attention = shape.n_layers * 2 * shape.batch * shape.pos * (shape.pos + 1) * d
    return 2.0 * tokens * dense_per_token + attention


# ------------------------------------------------------------------------------ memory
def bytes_held(tensors: Iterable[Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (an alias is counted once)."""
    storages = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        storages[(storage.device, storage.data_ptr())] = storage.nbytes()
    return sum(storages.values())


def cache_bytes(run_with_cache: Callable[[], Any], device: str) -> tuple[int, int | None, int]:
    """Bytes a cache holds, (on CUDA) the peak memory its run allocated above the start, and
    how many activations it holds."""
    if device.startswith("cuda"):
        synchronize(device)
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    _, cache = run_with_cache()
    peak = None
    if device.startswith("cuda"):
        synchronize(device)
        peak = torch.cuda.max_memory_allocated() - before
    held, n_held = bytes_held(cache.values()), len(cache)
    del cache
    return held, peak, n_held


# -------------------------------------------------------------------------------- main
def run(args: argparse.Namespace) -> list[str]:
    """Build the models, time and measure them; returns the printed lines."""
    shape = SMOKE if args.smoke else FULL
    device, dtype = args.device, getattr(torch, args.dtype)
    repeats = args.repeats if args.repeats is not None else (2 if args.smoke else 5)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    lines: list[str] = []
    say = printer(lines)
    allocator = memory_setting(args.keep_freed_memory)
    say(
        f"interp benchmark: {shape.description} ({shape.n_layers} layers, d_model "
        f"{shape.d_model}, {shape.n_heads} heads, vocab {shape.d_vocab}), {args.dtype}, "
        f"{device}, batch {shape.batch} x {shape.pos}, {torch.get_num_threads()} threads, "
        f"best of {repeats}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{allocator}"
    )
    hf = build_hf(shape, device, dtype)
    ours = from_hf_model(hf, tokenizer=None).eval()
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, shape.d_vocab, (shape.batch, shape.pos), generator=generator)
    tokens = tokens.to(device)
    if args.cache_cost:  # the child process of cache_cost_in_child
        with torch.no_grad():
            print_cost(cache_cost(ours, tokens, repeats, device))
        return lines
    with tempfile.TemporaryDirectory() as folder:
        bridge, why_not = build_transformer_lens(hf, folder, device, dtype)
    if bridge is None:
        say(f"  TransformerLens skipped: it could not boot offline ({why_not})")

    prompt = tokens[:, : shape.prompt_pos]
    # A GPU needs a bigger matmul than a CPU to reach its peak.
    matmul_size = 8192 if device.startswith("cuda") and not args.smoke else shape.matmul_size
    n_new = shape.new_tokens

    def hf_generate() -> Tensor:
        return hf.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=n_new,
            min_new_tokens=n_new,
            do_sample=False,
            pad_token_id=0,
        )

    def our_generate() -> Tensor:
        return ours.generate(
            prompt, max_new_tokens=n_new, do_sample=False, stop_at_eos=False, return_type="tokens"
        )

    with torch.no_grad():
        tolerance = 1e-3 if dtype == torch.float32 else 1e-1
        logits_gap = (ours(tokens) - hf(tokens, use_cache=False).logits).abs().max().item()
        same_tokens = torch.equal(our_generate(), hf_generate())
        say(
            f"  check: max |interp logits - HF logits| {'<=' if logits_gap <= tolerance else '>'} "
            f"{tolerance:g}; greedy tokens identical to HF generate: {same_tokens}"
        )

        contenders: dict[str, Callable[[], Any]] = {
            "hf forward": lambda: hf(tokens, use_cache=False),
            "interp forward": lambda: ours(tokens),
            "interp cache all": lambda: ours.run_with_cache(tokens),
            "interp cache early": lambda: ours.run_with_cache(
                tokens, names_filter=EARLY_HOOK, return_type=None
            ),
            "hf generate": hf_generate,
            "interp generate": our_generate,
            "matmul": square_matmul(matmul_size, device),
        }
        if bridge is not None:
            contenders |= {
                "tl forward": lambda: bridge(tokens),
                "tl cache all": lambda: bridge.run_with_cache(tokens),
                "tl cache early": lambda: bridge.run_with_cache(tokens, names_filter=EARLY_HOOK),
            }
        seconds = best_times(contenders, repeats, device)
        # The peak is the best rate seen: timed among the others, and alone ten more times.
        alone = best_times({"matmul": contenders["matmul"]}, 10, device)["matmul"]
        peak_rate = 2.0 * matmul_size**3 / min(seconds["matmul"], alone)
        faults = {"interp forward": -1, "interp cache all": -1}
        if device == "cpu":
            faults = fault_counts({name: contenders[name] for name in faults})

        ours_bytes, ours_peak, _ = cache_bytes(lambda: ours.run_with_cache(tokens), device)
        if bridge is not None:
            tl_bytes, tl_peak, _ = cache_bytes(lambda: bridge.run_with_cache(tokens), device)
            shared_names = set(ours.hook_dict) & set(bridge.hook_dict)
            tl_same_bytes, _, _ = cache_bytes(
                lambda: bridge.run_with_cache(tokens, names_filter=lambda n: n in shared_names),
                device,
            )
            our_same_bytes, _, _ = cache_bytes(
                lambda: ours.run_with_cache(tokens, names_filter=sorted(shared_names)), device
            )

    # This process's allocator setting, measured above; on the CPU the other one too, in a
    # child process (keep_freed_memory() cannot be undone).
    costs = {
        allocator: {
            "ratio": seconds["interp cache all"] / seconds["interp forward"],
            "forward faults": faults["interp forward"],
            "cache faults": faults["interp cache all"],
        }
    }
    if device == "cpu":
        kept = args.keep_freed_memory
        other = memory_setting(False) if kept else "keep_freed_memory()"
        costs[other] = cache_cost_in_child(__file__, child_argv(args), keep=not kept)
        for line in cost_lines(costs):
            say(line)
    s = seconds
    rows: list[tuple[str, float, str]] = [
        ("plain forward: interp / HF (sdpa)", s["interp forward"] / s["hf forward"], "<= 1.05"),
        *(
            (
                f"run_with_cache, every hook, {setting}: interp / interp forward",
                cost["ratio"],
                "<= 1.15",
            )
            for setting, cost in costs.items()
        ),
        (
            f"run_with_cache, {EARLY_HOOK} only: interp / interp forward",
            s["interp cache early"] / s["interp forward"],
            "<= 0.3",
        ),
        (
            f"generate {n_new} tokens (greedy, KV cache): interp / HF generate",
            s["interp generate"] / s["hf generate"],
            "<= 1.0",
        ),
    ]
    if bridge is not None:
        rows += [
            ("plain forward: TransformerLens / HF (sdpa)", s["tl forward"] / s["hf forward"], ""),
            (
                "run_with_cache, every hook: TL / TL forward",
                s["tl cache all"] / s["tl forward"],
                "",
            ),
            (
                f"run_with_cache, {EARLY_HOOK} only: TL / TL forward",
                s["tl cache early"] / s["tl forward"],
                "",
            ),
            (
                "run_with_cache, every hook: interp / TL",
                s["interp cache all"] / s["tl cache all"],
                "",
            ),
            ("cache bytes, every hook each offers: interp / TL", ours_bytes / tl_bytes, "<= 1.0"),
            (
                f"cache bytes, the {len(shared_names)} hook names both have: interp / TL",
                our_same_bytes / tl_same_bytes,
                "<= 1.0",
            ),
        ]
        if ours_peak is not None and tl_peak is not None:
            rows.append(
                ("peak GPU memory of a full-cache run: interp / TL", ours_peak / tl_peak, "")
            )
    flops = forward_flops(shape)
    rows += [
        ("forward FLOP/s / fp32 matmul peak: interp", flops / s["interp forward"] / peak_rate, ""),
        ("forward FLOP/s / fp32 matmul peak: HF (sdpa)", flops / s["hf forward"] / peak_rate, ""),
    ]
    header = "ratio (of best-of-N times, or of bytes; lower is faster/smaller)"
    print_ratio_table(rows, header, args.smoke, say)
    return lines


def child_argv(args: argparse.Namespace) -> list[str]:
    """The options a child process measuring the cache cost needs to run the same shapes."""
    argv = ["--device", args.device, "--dtype", args.dtype, "--threads", str(args.threads)]
    argv += ["--repeats", str(args.repeats)] if args.repeats is not None else []
    return argv + (["--smoke"] if args.smoke else [])


def memory_parser(description: str) -> argparse.ArgumentParser:
    """The ratio benchmarks' options plus ``--keep-freed-memory`` (and the child's flag)."""
    return add_memory_options(ratio_parser(description))


def main(argv: list[str] | None = None) -> list[str]:
    return run(parse_ratio_args(memory_parser(__doc__.split("\n\n")[0]), argv))


if __name__ == "__main__":
    main()
