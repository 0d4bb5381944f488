"""The cost of splicing an SAE, and the speed of mining top-activating contexts.

On the shipped ``shakespeare-char`` model and its shipped SAE (``blocks.1.hook_resid_post``,
1,024 features), best-of-N times, interleaved round by round (the machine may be shared),
printed as ratios against a peer run in the same process:

- the spliced forward caching the features (``run_with_cache`` inside ``model.saes``), against
  a plain forward caching the same hook, and against a plain forward caching the hook plus
  the same SAE run by hand on the cached activation (the same arithmetic, not spliced);
- ``run_with_cache_with_saes`` (splicing and unsplicing on every call), against the plain
  forward;
- ``top_activations`` (top-k contexts, density, histograms for every feature) in tokens per
  second, against ``feature_acts`` alone (the forward to the hook and the encoder).

Usage::

    python benchmarks/bench_sae.py            # 16 windows of 128 characters, 5 rounds
    python benchmarks/bench_sae.py --smoke    # tiny batches, a few seconds (run by the tests)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from timing import best_times

import interp
from interp.sae import HookedSAETransformer
from interp.sae.features import feature_acts, text_windows, top_activations
from interp.training.text import default_text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    batch, n_mine = (2, 8) if args.smoke else (16, 256)
    repeats = 1 if args.smoke else args.repeats

    model = HookedSAETransformer.from_model(interp.load_model("shakespeare-char")).eval()
    sae = interp.load_sae("shakespeare-char-resid-l1")
    hook = sae.cfg.hook_name
    features = f"{hook}.hook_sae_acts_post"
    windows = text_windows(model, default_text()[: (n_mine + 1) * model.cfg.n_ctx])
    tokens = windows[:batch]

    def plain() -> object:
        return model.run_with_cache(tokens, names_filter=[hook])

    def plain_and_sae() -> object:
        logits, cache = model.run_with_cache(tokens, names_filter=[hook])
        return logits, sae.encode(cache[hook]), sae.decode(sae.encode(cache[hook]))

    def spliced() -> object:
        return model.run_with_cache(tokens, names_filter=[features])

    def splice_each_call() -> object:
        return model.run_with_cache_with_saes(tokens, saes=[sae], names_filter=[features])

    with torch.no_grad():
        with model.saes([sae]):
            _, cache = model.run_with_cache(tokens, names_filter=[features])
            spliced_acts = cache[features]
            reference = sae.encode(model.run_with_cache(tokens, names_filter=[hook])[1][hook])
        same = torch.allclose(spliced_acts, reference, atol=1e-5)

        def in_context(run: Callable[[], object]) -> Callable[[], object]:
            def wrapped() -> object:
                with model.saes([sae]):
                    return run()

            return wrapped

        times = best_times(
            {
                "plain": plain,
                "plain + SAE by hand": plain_and_sae,
                "spliced": in_context(spliced),  # the with block's cost is included
                "run_with_cache_with_saes": splice_each_call,
            },
            repeats,
        )
        mine = windows[:n_mine]
        mining = best_times(
            {
                "top_activations": lambda: top_activations(model, sae, mine, k=20, batch_size=32),
                "feature_acts": lambda: [feature_acts(model, sae, b) for b in mine.split(32)],
            },
            max(1, repeats // 2),
        )
    n_tokens = mine.numel()
    print(f"shakespeare-char + {sae!r}; batch {tuple(tokens.shape)}; {args.threads} thread(s)")
    print(f"spliced features equal the SAE on the plain cache: {same}")
    rows = [
        ("spliced forward caching features / plain forward caching the hook", "spliced", "plain"),
        ("spliced / plain forward + the same SAE by hand", "spliced", "plain + SAE by hand"),
        ("run_with_cache_with_saes / plain forward caching the hook", "run_with_cache_with_saes",
         "plain"),
    ]  # fmt: skip
    for label, numerator, denominator in rows:
        print(f"{label:<72} {times[numerator] / times[denominator]:6.3f}x")
    rate = n_tokens / mining["top_activations"]
    print(f"{'top_activations, tokens/s (k=20, 1024 features)':<72} {rate:8.0f}")
    ratio = mining["top_activations"] / mining["feature_acts"]
    print(f"{'top_activations / feature_acts alone':<72} {ratio:6.3f}x")


if __name__ == "__main__":
    main()
