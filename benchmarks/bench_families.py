"""Speed on a Llama-shaped model: interp against Hugging Face and TransformerLens, as ratios.

One run builds random Llama 3-shaped weights (RMSNorm, rotary, grouped-query attention,
SwiGLU) as Hugging Face's ``LlamaForCausalLM`` (``attn_implementation="sdpa"``) and loads the
same weights into interp (``from_hf_model``). Side by side, interleaved round by round, it
prints ratios of best-of-N times (the machine may be shared and noisy), never absolute figures:

- the plain forward (logits), interp against Hugging Face (target <= 1.0);
- ``run_with_cache`` of every hook against interp's own forward (target <= 1.1), with glibc's
  defaults and with ``interp.utils.malloc_tuning.keep_freed_memory()`` (the other setting in a child
  process, see ``allocator.py``), with the minor page faults of one call of each;
- a Mixtral-shaped model (4 layers, d_model 512, 8 experts of 1792, top 2; 4 x 256 tokens):
  its forward against Hugging Face's ``MixtralForCausalLM`` on the same weights (target
  <= 1.05) and ``run_with_cache`` of every hook, each expert's included, against that
  forward (target <= 1.15);
- a gpt-oss-shaped model (4 layers, d_model 512, 8 / 1 heads of 64 with sinks, sliding
  window 128 on every other layer, YaRN, 16 experts of 512, top 4; 4 x 256 tokens): the same
  two ratios against ``GptOssForCausalLM`` (eager attention, its only one on the CPU);
- the ``resid_pre`` activation-patching sweep (every layer x position) against
  TransformerLens 4.x's ``TransformerBridge`` booted offline from the same weights saved to a
  temporary folder (TransformerLens runs one forward per patch, so this sweep uses a smaller
  Llama-shaped model and a 16-token prompt pair; its results must agree).

The forward model is 16 layers, d_model 2048, 32 query / 8 key-value heads of 64, d_mlp
8192, vocab 32000 (Llama 3.2 1B's shape with a smaller vocabulary), on 4 x 256 tokens;
``--d-mlp`` and ``--layers`` shrink it when memory or time demand (the printed header says
what ran). On CUDA it also reports the bytes a full cache holds and the peak GPU memory of
the full-cache run. Everything runs under ``torch.no_grad()``. Usage::

    python benchmarks/bench_families.py                  # fp32, CPU, 2 threads
    python benchmarks/bench_families.py --device cuda --dtype bfloat16
    python benchmarks/bench_families.py --smoke          # tiny shapes, seconds (the tests run it)
    python benchmarks/bench_families.py --keep-freed-memory   # glibc keeps freed memory (opt-in)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# TransformerLens boots from a local folder; nothing may reach the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import argparse  # noqa: E402
import gc  # noqa: E402
import logging  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from functools import partial  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from allocator import cache_cost, cache_cost_in_child, cost_lines, memory_setting, print_cost  # noqa: E402
from bench_model import cache_bytes, child_argv, memory_parser  # noqa: E402
from bench_patching import timed  # noqa: E402
from ratio_report import parse_ratio_args, print_ratio_table, printer  # noqa: E402
from timing import best_times, synchronize  # noqa: E402

import interp  # noqa: E402
from interp.loading.hf import from_hf_model  # noqa: E402


@dataclass(frozen=True)
class LlamaShape:
    """A Llama-shaped model and the tokens it runs on."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_mlp: int
    d_vocab: int
    batch: int
    pos: int

    def describe(self) -> str:
        return (
            f"{self.n_layers} layers, d_model {self.d_model}, {self.n_heads} query / "
            f"{self.n_kv_heads} KV heads of {self.d_model // self.n_heads}, d_mlp {self.d_mlp}, "
            f"vocab {self.d_vocab}; {self.batch} x {self.pos} tokens"
        )


@dataclass(frozen=True)
class MixtralShape(LlamaShape):
    """A Mixtral-shaped model: a Llama-shaped one whose MLPs are ``n_experts`` experts of
    ``d_mlp``, ``top_k`` a token."""

    n_experts: int = 8
    top_k: int = 2

    def describe(self) -> str:
        return f"{super().describe()}; {self.n_experts} experts, top {self.top_k}"


FORWARD = LlamaShape(16, 2048, 32, 8, 8192, 32000, 4, 256)
# Mixtral 8x7B's proportions (heads of 128, 4 query heads a key/value head, d_mlp 3.5 d_model,
# 8 experts, top 2) at an eighth of its width and 4 layers.
MOE_FORWARD = MixtralShape(4, 512, 4, 1, 1792, 32000, 4, 256)
SMOKE_MOE = MixtralShape(2, 64, 4, 2, 128, 256, 2, 16, n_experts=4)
# gpt-oss-20b's proportions (heads of 64, 8 query heads a key/value head, experts as wide as
# d_model, top 4 of a power of two) at a sixth of its width, 4 layers and 16 experts.
GPT_OSS_FORWARD = MixtralShape(4, 512, 8, 1, 512, 32000, 4, 256, n_experts=16, top_k=4)
SMOKE_GPT_OSS = MixtralShape(2, 64, 4, 2, 64, 256, 2, 16, n_experts=4)
PATCHING = LlamaShape(4, 1024, 16, 4, 4096, 32000, 1, 16)
SMOKE_FORWARD = LlamaShape(2, 64, 4, 2, 128, 256, 2, 16)
SMOKE_PATCHING = LlamaShape(2, 64, 4, 2, 128, 256, 1, 6)


def build_llama(shape: LlamaShape, device: str, dtype: torch.dtype) -> Any:
    """Random-weight ``LlamaForCausalLM`` (sdpa attention, Llama 3's rope base) in eval mode."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=shape.d_vocab,
        hidden_size=shape.d_model,
        intermediate_size=shape.d_mlp,
        num_hidden_layers=shape.n_layers,
        num_attention_heads=shape.n_heads,
        num_key_value_heads=shape.n_kv_heads,
        max_position_embeddings=max(2 * shape.pos, 128),
        rope_theta=500000.0,
        attn_implementation="sdpa",
    )
    return transformers.LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def build_mixtral(shape: MixtralShape, device: str, dtype: torch.dtype) -> Any:
    """Random-weight ``MixtralForCausalLM`` (sdpa attention) in eval mode."""
    torch.manual_seed(0)
    config = transformers.MixtralConfig(
        vocab_size=shape.d_vocab,
        hidden_size=shape.d_model,
        intermediate_size=shape.d_mlp,
        num_hidden_layers=shape.n_layers,
        num_attention_heads=shape.n_heads,
        num_key_value_heads=shape.n_kv_heads,
        num_local_experts=shape.n_experts,
        num_experts_per_tok=shape.top_k,
        max_position_embeddings=max(2 * shape.pos, 128),
        attn_implementation="sdpa",
    )
    return transformers.MixtralForCausalLM(config).to(device=device, dtype=dtype).eval()


def build_gpt_oss(shape: MixtralShape, device: str, dtype: torch.dtype) -> Any:
    """Random-weight ``GptOssForCausalLM`` (eager attention; sinks, windows of 128 on every
    other layer, YaRN as gpt-oss's) in eval mode."""
    torch.manual_seed(0)
    config = transformers.GptOssConfig(
        vocab_size=shape.d_vocab,
        hidden_size=shape.d_model,
        intermediate_size=shape.d_mlp,
        head_dim=shape.d_model // shape.n_heads,
        num_hidden_layers=shape.n_layers,
        num_attention_heads=shape.n_heads,
        num_key_value_heads=shape.n_kv_heads,
        num_local_experts=shape.n_experts,
        num_experts_per_tok=shape.top_k,
        sliding_window=128,
        max_position_embeddings=4096 * 32,
        attn_implementation="eager",
    )
    return transformers.GptOssForCausalLM(config).to(device=device, dtype=dtype).eval()


def word_tokenizer(d_vocab: int) -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer (``w0`` ... one word a token) for TransformerLens to boot with."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<bos>", "<eos>"] + [f"w{i}" for i in range(d_vocab - 2)]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<bos>", eos_token="<eos>"
    )


def random_tokens(shape: LlamaShape, device: str, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, shape.d_vocab, (shape.batch, shape.pos), generator=generator).to(device)


def forward_rows(
    shape: LlamaShape, device: str, dtype: torch.dtype, repeats: int, say, allocator: str
) -> tuple[list[tuple[str, float, str]], dict[str, float]]:
    """Forward against Hugging Face; then, with Hugging Face's model released (it takes no
    part in that ratio, and its memory would only crowd the allocator), a full cache against
    the forward (its ratio and page faults, under this process's ``allocator`` setting, are
    also returned)."""
    hf = build_llama(shape, device, dtype)
    ours = from_hf_model(hf, tokenizer=None).eval()
    tokens = random_tokens(shape, device, seed=1)
    with torch.no_grad():
        tolerance = 1e-3 if dtype == torch.float32 else 2e-1
        gap = (ours(tokens) - hf(tokens, use_cache=False).logits).abs().max().item()
        say(
            f"  check: max |interp logits - HF logits| {'<=' if gap <= tolerance else '>'} "
            f"{tolerance:g}"
        )
        hf_forward = partial(hf, tokens, use_cache=False)
        against_hf = best_times(
            {"hf forward": hf_forward, "interp forward": lambda: ours(tokens)}, repeats, device
        )
        del hf_forward, hf
        gc.collect()
        cost = cache_cost(ours, tokens, repeats, device)
        held, peak, n_cached = cache_bytes(lambda: ours.run_with_cache(tokens), device)
        say(
            f"  the full cache holds {n_cached} of {len(ours.hook_dict)} hooks, "
            f"{held / 2**30:.2f} GiB"
        )
        if device.startswith("cuda"):
            say(f"  peak GPU memory of a full-cache run above the weights: {peak / 2**30:.2f} GiB")
    return [
        (
            "plain forward: interp / HF (sdpa)",
            against_hf["interp forward"] / against_hf["hf forward"],
            "<= 1.0",
        ),
        cache_row(allocator, cost),
    ], cost


def cache_row(allocator: str, cost: dict[str, float]) -> tuple[str, float, str]:
    label = f"run_with_cache, every hook, {allocator}: interp / interp forward"
    return label, cost["ratio"], "<= 1.1"


def moe_rows(
    shape: MixtralShape,
    device: str,
    dtype: torch.dtype,
    repeats: int,
    say,
    name: str = "Mixtral",
    attention: str = "sdpa",
) -> list[tuple[str, float, str]]:
    """A Mixtral-shaped (or ``name="gpt-oss"``-shaped) model: forward against Hugging
    Face's on the same weights, then a full cache (every hook, the experts' included)
    against the forward."""
    hf = (build_gpt_oss if name == "gpt-oss" else build_mixtral)(shape, device, dtype)
    ours = from_hf_model(hf, tokenizer=None).eval()
    tokens = random_tokens(shape, device, seed=4)
    with torch.no_grad():
        tolerance = 1e-3 if dtype == torch.float32 else 2e-1
        gap = (ours(tokens) - hf(tokens, use_cache=False).logits).abs().max().item()
        say(
            f"  check: {name}-shaped ({shape.describe()}): max |interp logits - HF logits| "
            f"{'<=' if gap <= tolerance else '>'} {tolerance:g}"
        )
        hf_forward = partial(hf, tokens, use_cache=False)
        against_hf = best_times(
            {"hf forward": hf_forward, "interp forward": lambda: ours(tokens)}, repeats, device
        )
        del hf_forward, hf
        gc.collect()
        against_forward = best_times(
            {
                "interp forward": lambda: ours(tokens),
                "interp cache all": lambda: ours.run_with_cache(tokens),
            },
            repeats,
            device,
        )
    return [
        (
            f"{name}-shaped forward: interp / HF ({attention})",
            against_hf["interp forward"] / against_hf["hf forward"],
            "<= 1.05",
        ),
        (
            f"{name}-shaped run_with_cache, every hook: interp / interp forward",
            against_forward["interp cache all"] / against_forward["interp forward"],
            "<= 1.15",
        ),
    ]


def patching_rows(
    shape: LlamaShape, device: str, dtype: torch.dtype, repeats: int, say
) -> list[tuple[str, float, str]]:
    """The resid_pre sweep against TransformerLens's on the same weights (empty, with a line
    saying why, when TransformerLens cannot boot them offline)."""
    hf = build_llama(shape, device, dtype)
    ours = from_hf_model(hf, tokenizer=None).eval()
    with tempfile.TemporaryDirectory() as folder:
        hf.save_pretrained(folder)
        word_tokenizer(shape.d_vocab).save_pretrained(folder)
        del hf
        try:
            from transformer_lens.model_bridge import TransformerBridge

            logging.getLogger("transformers").setLevel(logging.ERROR)
            bridge = TransformerBridge.boot_transformers(folder, device=device, dtype=dtype)
            bridge.eval()
        except Exception as error:  # any failure to boot offline is reported, not fatal
            say(f"  TransformerLens skipped: it could not boot offline ({type(error).__name__})")
            return []
    import transformer_lens.patching as tl_patching

    clean = random_tokens(shape, device, seed=2)
    corrupted = random_tokens(shape, device, seed=3)
    answers = torch.tensor([[1, 2]], device=device)  # any two tokens: a logit difference

    def tl_metric(logits: torch.Tensor) -> torch.Tensor:
        last = logits[:, -1].float()
        return (last.gather(1, answers[:, :1]) - last.gather(1, answers[:, 1:])).mean()

    metric = interp.patching.LogitDiff(answers)
    with torch.no_grad():
        _, clean_cache = ours.run_with_cache(clean)
        _, tl_clean_cache = bridge.run_with_cache(clean)
        sweeps = {
            "tl": lambda: tl_patching.get_act_patch_resid_pre(
                bridge, corrupted, tl_clean_cache, tl_metric
            ),
            "interp": lambda: interp.patching.get_act_patch_resid_pre(
                ours, corrupted, clean_cache, metric, progress=False
            ),
        }
        results, best = {}, {}
        for _ in range(repeats):  # interleaved rounds, best of each
            for name, sweep in sweeps.items():
                synchronize(device)
                results[name], seconds = timed(sweep, 1)
                synchronize(device)
                best[name] = min(best.get(name, float("inf")), seconds[0])
    ours_result = results["interp"].as_subclass(torch.Tensor).float()
    gap = (ours_result - results["tl"].float()).abs().max().item()
    tolerance = 1e-3 if dtype == torch.float32 else 2e-1
    say(
        f"  check: resid_pre sweep {tuple(ours_result.shape)} (layer x position) on "
        f"{shape.describe()}: max |interp - TransformerLens| "
        f"{'<=' if gap <= tolerance else '>'} {tolerance:g}"
    )
    return [
        (
            "resid_pre patching sweep: TransformerLens / interp (speed-up)",
            best["tl"] / best["interp"],
            "",
        )
    ]


def run(args: argparse.Namespace) -> list[str]:
    """Build the models, time them; returns the printed lines."""
    forward_shape = SMOKE_FORWARD if args.smoke else FORWARD
    overrides = {"n_layers": args.layers, "d_mlp": args.d_mlp}
    forward_shape = replace(forward_shape, **{k: v for k, v in overrides.items() if v})
    patching_shape = SMOKE_PATCHING if args.smoke else PATCHING
    device, dtype = args.device, getattr(torch, args.dtype)
    repeats = args.repeats if args.repeats is not None else (1 if args.smoke else 5)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    lines: list[str] = []
    say = printer(lines)
    allocator = memory_setting(args.keep_freed_memory)
    say(
        f"interp family benchmark: Llama-shaped, {forward_shape.describe()}, {args.dtype}, "
        f"{device}, {torch.get_num_threads()} threads, best of {repeats} interleaved rounds, "
        f"torch {torch.__version__}, transformers {transformers.__version__}, {allocator}"
    )
    if args.cache_cost:  # the child process of cache_cost_in_child
        ours = from_hf_model(build_llama(forward_shape, device, dtype), tokenizer=None).eval()
        with torch.no_grad():
            print_cost(cache_cost(ours, random_tokens(forward_shape, device, 1), repeats, device))
        return lines
    rows, cost = forward_rows(forward_shape, device, dtype, repeats, say, allocator)
    if device == "cpu":  # the other allocator setting, in a child process
        other = memory_setting(False) if args.keep_freed_memory else "keep_freed_memory()"
        argv = child_argv(args) + [
            f"--{k.replace('_', '-')}={v}" for k, v in overrides.items() if v
        ]
        costs = {
            allocator: cost,
            other: cache_cost_in_child(__file__, argv, not args.keep_freed_memory),
        }
        rows.append(cache_row(other, costs[other]))
        for line in cost_lines(costs):
            say(line)
    if not args.skip_moe:
        rows += moe_rows(SMOKE_MOE if args.smoke else MOE_FORWARD, device, dtype, repeats, say)
        gpt_oss_shape = SMOKE_GPT_OSS if args.smoke else GPT_OSS_FORWARD
        rows += moe_rows(gpt_oss_shape, device, dtype, repeats, say, "gpt-oss", "eager")
    if not args.skip_patching:
        rows += patching_rows(patching_shape, device, dtype, repeats, say)
    print_ratio_table(rows, "ratio (of best-of-N times; lower is faster)", args.smoke, say)
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = memory_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=None, help="forward model's layers")
    parser.add_argument("--d-mlp", type=int, default=None, help="forward model's d_mlp")
    parser.add_argument("--skip-patching", action="store_true", help="no TransformerLens sweep")
    parser.add_argument(
        "--skip-moe", action="store_true", help="no Mixtral- or gpt-oss-shaped model"
    )
    return run(parse_ratio_args(parser, argv))


if __name__ == "__main__":
    main()
