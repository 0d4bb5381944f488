"""The GPU checks in one command: family parity in fp32 and bf16, generation, the benchmark.

On a CUDA device it runs, and summarises in a few lines:

1. parity: every random tiny checkpoint of ``tests/loading/test_families_parity.py`` (GPT-NeoX,
   Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3) loaded on the GPU, against Hugging Face
   on the GPU: fp32 logits within 1e-4 (fused attention and the hooked path); bf16 logits at
   most as far from Hugging Face's bf16 as Hugging Face's bf16 is from its fp32 (plus 0.01
   for rounding), and how far both bf16 runs are from Hugging Face's fp32;
2. generation: greedy KV-cache generation equals Hugging Face's ``generate`` (fp32);
3. flash attention: the bf16 forward of a Llama-shaped model runs with SDPA restricted to
   the flash kernel;
4. circuit tracing: one attribution graph at ``bench_circuits.py``'s shape, the
   written-out backward pass against autograd's (time, largest difference);
5. the benchmark (``bench_families.py``) on CUDA in fp32 and bf16: forward against HF sdpa,
   ``run_with_cache`` of every hook against the forward, the patching sweep against
   TransformerLens, and the peak GPU memory of a full cache;
6. layers over devices: a GPT-NeoX, a Llama (rotary, grouped keys) and a BLOOM (ALiBi) with
   the embedding and the first half of the blocks on ``cuda:0``, the rest on the CPU
   (``device_map``): logits, every cached activation (gathered with ``device="cpu"``), the
   loss and KV-cache generation against the all-CPU model;
7. MXFP4 experts (``bench_mxfp4.py``) on CUDA: kept against dequantized at load, the
   model's bytes and the peak memory of a forward as ratios, logits bit-equal.

Without CUDA it says so and exits 0. ``--device cpu --quick`` runs the same code on the CPU
with tiny benchmark shapes (the tests do, so the script cannot rot). Usage::

    python benchmarks/gpu_check.py            # on a machine with a GPU: about 5 minutes
    python benchmarks/gpu_check.py --quick    # parity and smoke-sized benchmark only
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402


def parity(device: str, lines: list[str]) -> bool:
    """Every family case against Hugging Face on ``device``; one line per case."""
    from interp import HookedTransformer
    from tests.loading.test_families_parity import CASES, saved, tokens

    ok = True
    for name, case in CASES.items():
        implementation = "sdpa" if case.sdpa else "eager"
        with tempfile.TemporaryDirectory() as folder, torch.no_grad():
            hf_class = type(saved(folder, name))
            ids = tokens().to(device)
            logits, models = {}, {}
            for dtype in (torch.float32, torch.bfloat16):
                hf = hf_class.from_pretrained(
                    folder, dtype=dtype, attn_implementation=implementation
                ).to(device)
                ours = HookedTransformer.from_pretrained_no_processing(
                    folder, device=device, dtype=dtype, tokenizer=None
                )
                models[dtype] = hf, ours
                hooked, _ = ours.run_with_cache(ids, names_filter=lambda n: "pattern" in n)
                logits[dtype] = hf(ids).logits.float(), ours(ids).float(), hooked.float()
            hf32, ours32, hooked32 = logits[torch.float32]
            hf16, ours16, hooked16 = logits[torch.bfloat16]
            fp32_gap = max((ours32 - hf32).abs().max(), (hooked32 - hf32).abs().max()).item()
            hf_bf16_gap = (hf16 - hf32).abs().max().item()
            bf16_gap = max((ours16 - hf16).abs().max(), (hooked16 - hf16).abs().max()).item()
            ours_bf16_error = (ours16 - hf32).abs().max().item()
            hf, ours = models[torch.float32]
            prompt = ids[:1, :5]
            generated = ours.generate(prompt, max_new_tokens=8, do_sample=False, stop_at_eos=False)
            same_generation = torch.equal(
                generated,
                hf.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    max_new_tokens=8,
                    min_new_tokens=8,
                    do_sample=False,
                    pad_token_id=0,
                ),
            )
        case_ok = fp32_gap <= 1e-4 and bf16_gap <= hf_bf16_gap + 0.01 and same_generation
        ok &= case_ok
        lines.append(
            f"  {'ok  ' if case_ok else 'FAIL'} {name:<42} fp32 {fp32_gap:.1e} | bf16 vs HF "
            f"bf16 {bf16_gap:.3f}, HF bf16 vs fp32 {hf_bf16_gap:.3f}, ours bf16 vs HF fp32 "
            f"{ours_bf16_error:.3f} | generate "
            f"{'same' if same_generation else 'DIFFERS'}"
        )
    return ok


def flash_attention(device: str, lines: list[str]) -> bool:
    """A bf16 Llama-shaped forward with SDPA restricted to the flash kernel (CUDA only)."""
    from bench_families import SMOKE_FORWARD, build_llama, random_tokens
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from interp.loading.hf import from_hf_model
    from interp.model import HookedTransformer

    if not device.startswith("cuda"):
        lines.append("  flash attention: skipped (not on CUDA)")
        return True
    hf = build_llama(SMOKE_FORWARD, device, torch.bfloat16)
    ours = from_hf_model(hf, tokenizer=None, model_class=HookedTransformer).eval()
    ids = random_tokens(SMOKE_FORWARD, device, seed=1)
    try:
        with torch.no_grad(), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            flash = ours(ids).float()
        with torch.no_grad():
            reference = hf(ids).logits.float()
    except RuntimeError as error:
        lines.append(f"  FAIL flash attention: {str(error).splitlines()[0]}")
        return False
    gap = (flash - reference).abs().max().item()
    lines.append(f"  ok   flash attention (SDPA flash kernel only, bf16): max |diff| {gap:.3f}")
    return True


def circuits(device: str, quick: bool, lines: list[str]) -> bool:
    """One attribution graph of a Llama-shaped model with skip transcoders
    (``bench_circuits.py``'s inputs) on ``device``: the written-out backward pass against
    autograd's, time and the largest difference."""
    import bench_circuits
    from safetensors.torch import load_file

    from interp import HookedTransformer, HookedTransformerConfig
    from interp.circuits import ReplacementModel, attribute, attribution, load_transcoders

    args = bench_circuits.parse_arguments(["--smoke"] if quick else [])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        bench_circuits.write_inputs(folder, args)
        cfg = json.loads((folder / "config.json").read_text())
        model = HookedTransformer(HookedTransformerConfig(**cfg, device=device))
        model.load_state_dict(load_file(folder / "model.safetensors", device=device), strict=False)
        replacement = ReplacementModel.from_model(model, load_transcoders(folder / "tc"))
        tokens = torch.tensor(json.loads((folder / "tokens.json").read_text()), device=device)
        graphs, seconds = [], []
        for why_autograd in (None, "gpu_check's comparison"):
            previous = attribution.unsupported
            attribution.unsupported = lambda model, why=why_autograd: why
            try:
                attribute(tokens, replacement, batch_size=256)  # warm-up
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                begin = time.perf_counter()
                graphs.append(attribute(tokens, replacement, batch_size=256).adjacency_matrix)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                seconds.append(time.perf_counter() - begin)
            finally:
                attribution.unsupported = previous
    gap = ((graphs[0] - graphs[1]).abs().max() / graphs[1].abs().max()).item()
    ok = gap < 1e-4
    lines.append(
        f"  {'ok  ' if ok else 'FAIL'} attribution graph ({args.layers}x{args.d_model}, "
        f"{args.features} features, {args.tokens} tokens, {len(graphs[0])} nodes): written-out "
        f"backward {seconds[0]:.2f} s, autograd {seconds[1]:.2f} s, max |diff| / max |A| {gap:.1e}"
    )
    return ok


def layers_over_devices(device: str, lines: list[str]) -> bool:
    """Each case with the embedding and blocks ``[0, n/2)`` on ``device``, the other blocks,
    ``ln_final`` and ``unembed`` on the CPU, against the same checkpoint all on the CPU
    (fp32): logits, every hook of a left-padded batch (gathered to the CPU), the loss, and
    greedy KV-cache generation. On the CPU (the dry run) both halves are on the CPU."""
    from interp import HookedTransformer
    from tests.loading import test_families2_parity, test_families_parity

    cases = {
        "neox-sequential-half-rotary-no-bias": test_families_parity,
        "llama-gqa2-llama3-rope": test_families_parity,
        "bloom-alibi-4-heads-untied": test_families2_parity,
    }
    ok = True
    for name, module in cases.items():
        with tempfile.TemporaryDirectory() as folder, torch.no_grad():
            module.saved(folder, name)
            load = HookedTransformer.from_pretrained_no_processing
            one = load(folder, device="cpu", tokenizer=None)
            half = one.cfg.n_layers // 2
            device_map = {"embed": device, "blocks": "cpu", "unembed": "cpu"}
            device_map |= {f"blocks.{index}": device for index in range(half)}
            laid = load(folder, device_map=device_map, tokenizer=None)
            ids = module.tokens()
            mask = torch.ones_like(ids)
            mask[-1, :3] = 0  # left padding: the mask and the positions cross the boundary
            logits, cache = laid.run_with_cache(ids, attention_mask=mask, device="cpu")
            expected, expected_cache = one.run_with_cache(ids, attention_mask=mask)
            logits_gap = (logits.cpu() - expected).abs().max().item()
            cache_gap = max(
                ((cache[hook] - value).abs().max() / value.abs().max().clamp(min=1e-6)).item()
                for hook, value in expected_cache.items()
            )
            same_places = all(value.device.type == "cpu" for value in cache.values())
            loss_gap = abs(laid(ids, return_type="loss").item() - one(ids, return_type="loss"))
            prompt = ids[:1, :5]
            generated = laid.generate(prompt, max_new_tokens=6, do_sample=False, verbose=False)
            same_generation = torch.equal(
                generated.cpu(),
                one.generate(prompt, max_new_tokens=6, do_sample=False, verbose=False),
            )
        case_ok = (
            logits_gap <= 1e-4
            and cache_gap <= 1e-4
            and loss_gap <= 1e-5
            and same_places
            and same_generation
        )
        ok &= case_ok
        lines.append(
            f"  {'ok  ' if case_ok else 'FAIL'} {name:<38} {sorted(set(laid.device_map.values()))}"
            f": logits {logits_gap:.1e}, cache (relative) {cache_gap:.1e}, loss {loss_gap:.1e}, "
            f"generate {'same' if same_generation else 'DIFFERS'}"
        )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default); cpu for a dry run")
    parser.add_argument("--quick", action="store_true", help="smoke-sized benchmark only")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "gpu_check: no CUDA device here (torch.cuda.is_available() is False); nothing to "
            "check. Run it on a machine with a GPU, or with --device cpu --quick for a dry run."
        )
        return 0
    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    start = time.perf_counter()
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    lines = [f"gpu_check on {name} (torch {torch.__version__})", "parity against Hugging Face:"]
    ok = parity(args.device, lines)
    ok &= flash_attention(args.device, lines)
    lines.append("circuit tracing:")
    ok &= circuits(args.device, args.quick, lines)
    lines.append("layers over devices (one process, device_map):")
    ok &= layers_over_devices(args.device, lines)
    if args.device.startswith("cuda"):
        import bench_mxfp4

        mxfp4 = bench_mxfp4.main(["--device", args.device] + (["--smoke"] if args.quick else []))
        ok &= mxfp4[-1].strip() == "logits bit-equal"
        lines += mxfp4

    import bench_families

    for dtype in ("float32", "bfloat16"):
        bench_argv = ["--device", args.device, "--dtype", dtype]
        bench_argv += ["--smoke", "--repeats", "1"] if args.quick else ["--repeats", "3"]
        lines += bench_families.main(bench_argv)
    if args.device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated() / 2**30
        lines.append(f"peak GPU memory of the whole check: {peak:.1f} GiB")
    lines.append(
        f"{'ALL OK' if ok else 'SOME CHECKS FAILED'} in {time.perf_counter() - start:.0f} s"
    )
    print("\n".join(["", "=" * 30 + " summary " + "=" * 30, *lines]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
