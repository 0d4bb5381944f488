"""Train the models shipped in ``interp/models`` (or the same recipes on your own text).

One recipe per shipped model; the same seed gives bit-identical weights on a CPU with the
recipe's thread count. Run it as a module:

    python -m interp.train shakespeare-char --out my-shakespeare      # the shipped checkpoint
    python -m interp.train shakespeare-char --text my_corpus.txt --steps 500 --out my-model
    python -m interp.train attn-only-2l --seed 1 --out my-attn-only

Text models are character-level: the alphabet is the text's set of characters, the first
90% trains and the last 10% is held out (nanoGPT's split). The validation loss is the mean
next-character loss over the whole held-out text, read in windows of ``n_ctx`` characters.

The pieces live in ``interp.training`` (recipes, text data, copied-segment data, induction
probes, the loop); every one of them is importable from here too.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from interp.config import HookedTransformerConfig
from interp.model import HookedTransformer
from interp.tokenizers import CharTokenizer, SymbolTokenizer
from interp.training.copied_segments import copied_segment_batch
from interp.training.induction_probes import (
    POSITION_PROBES,
    induction_figures,
    position_minima,
    position_scores,
    repeated_sequence,
)
from interp.training.loop import fit, lr_at, make_optimizer
from interp.training.recipes import RECIPES, Recipe
from interp.training.text import (
    VAL_FRACTION,
    default_text,
    sample_text,
    split_text,
    text_batch,
    text_loss,
)

__all__ = [
    "POSITION_PROBES",
    "RECIPES",
    "VAL_FRACTION",
    "Recipe",
    "copied_segment_batch",
    "default_text",
    "fit",
    "induction_figures",
    "lr_at",
    "main",
    "make_optimizer",
    "position_minima",
    "position_scores",
    "repeated_sequence",
    "sample_text",
    "split_text",
    "text_batch",
    "text_loss",
    "train",
]


def train(
    name: str,
    text: str | None = None,
    seed: int | None = None,
    steps: int | None = None,
    progress: bool = True,
    **recipe_overrides: Any,
) -> HookedTransformer:
    """Train the recipe ``name`` from ``seed`` (default: the recipe's) and return the model,
    with the run's figures in ``model.cfg.extra``.

    ``text`` replaces tiny-shakespeare for text recipes. Other ``Recipe`` fields can be
    overridden by keyword (e.g. ``batch_size=8``).

    Example:
        >>> model = train("shakespeare-char", text=open("my_corpus.txt").read(), steps=500)
        >>> model.cfg.extra["val_loss"]  # on the last 10% of the text
    """
    if name not in RECIPES:
        raise ValueError(f"No recipe named {name!r}; choose one of {sorted(RECIPES)}.")
    recipe = replace(RECIPES[name], **recipe_overrides)
    if seed is not None:
        recipe = replace(recipe, seed=seed)
    if steps is not None:
        recipe = replace(recipe, steps=steps)
    if text is not None and recipe.data != "text":
        raise ValueError(f"{name!r} trains on generated tokens, not text; drop --text.")
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    generator = torch.Generator().manual_seed(recipe.seed + 1)
    started = time.perf_counter()
    if recipe.data == "text":
        model, figures = _train_on_text(name, recipe, text, generator, progress)
    else:
        model, figures = _train_on_copied_segments(name, recipe, generator, progress)
    model.cfg.extra.update(
        figures,
        seed=recipe.seed,
        steps=recipe.steps,
        threads=recipe.threads,
        torch_version=torch.__version__,
        train_seconds=round(time.perf_counter() - started, 1),
    )
    return model


def _train_on_text(
    name: str, recipe: Recipe, text: str | None, generator: torch.Generator, progress: bool
) -> tuple[HookedTransformer, dict[str, Any]]:
    text = default_text() if text is None else text
    tokenizer = CharTokenizer(sorted(set(text)))
    train_text, val_text = split_text(text)
    train_tokens = torch.tensor(tokenizer.encode(train_text))
    cfg = HookedTransformerConfig(
        **recipe.config, d_vocab=tokenizer.vocab_size, seed=recipe.seed, model_name=name
    )
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    losses = fit(
        model,
        recipe,
        lambda: (text_batch(train_tokens, recipe.batch_size, cfg.n_ctx + 1, generator), None),
        progress,
    )
    figures = {
        "final_train_loss": losses[-1],
        "val_loss": text_loss(model, val_text),
        "val_fraction": VAL_FRACTION,
    }
    return model, figures


def _train_on_copied_segments(
    name: str, recipe: Recipe, generator: torch.Generator, progress: bool
) -> tuple[HookedTransformer, dict[str, Any]]:
    cfg = HookedTransformerConfig(**recipe.config, seed=recipe.seed, model_name=name)
    # Symbols 0 .. d_vocab - 2 are the random tokens; d_vocab - 1 is the BOS.
    model = HookedTransformer(cfg, tokenizer=SymbolTokenizer(cfg.d_vocab, cfg.d_vocab - 1))
    options = recipe.data_options
    losses = fit(
        model,
        recipe,
        lambda: copied_segment_batch(
            recipe.batch_size, cfg.n_ctx + 1, cfg.d_vocab, generator, **options
        ),
        progress,
    )
    return model, {
        "final_train_loss": losses[-1],
        **induction_figures(model),
        "position_minima": position_minima(model),
    }


# ------------------------------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> None:
    """``python -m interp.train <model> [--text FILE] [--seed N] [--steps N] [--out DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m interp.train", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("model", choices=sorted(RECIPES), help="which recipe to train")
    parser.add_argument("--text", type=Path, help="train on this UTF-8 text file instead")
    parser.add_argument("--seed", type=int, help="random seed (default: the recipe's)")
    parser.add_argument("--steps", type=int, help="training steps (default: the recipe's)")
    parser.add_argument("--out", type=Path, help="save the model here (native format)")
    args = parser.parse_args(argv)
    text = args.text.read_text(encoding="utf-8") if args.text is not None else None
    model = train(args.model, text=text, seed=args.seed, steps=args.steps)
    model.cfg.extra["command"] = shlex.join(
        ["python", "-m", "interp.train", *(argv or sys.argv[1:])]
    )
    for key, value in model.cfg.extra.items():
        print(f"{key}: {value}")
    if args.out is not None:
        model.save(args.out)
        print(f"saved to {args.out}")


if __name__ == "__main__":
    main()
