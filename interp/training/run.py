"""``train``: one recipe of ``interp.training.recipes`` from a seed to a model, with the run's
figures (losses, induction scores) in ``model.cfg.extra``.

Example:
    >>> from interp.training.run import train
    >>> from interp.training.text import default_text
    >>> threads = torch.get_num_threads()   # train() sets the recipe's thread count
    >>> model = train("shakespeare-char", text=default_text()[:3000], steps=2, batch_size=2,
    ...               progress=False)   # 2 steps on 3000 characters, to show the figures
    >>> torch.set_num_threads(threads)
    >>> sorted(model.cfg.extra)
    ['final_train_loss', 'seed', 'steps', 'threads', 'torch_version', 'train_seconds',
     'val_fraction', 'val_loss']
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import torch

from interp.config import HookedTransformerConfig
from interp.model import HookedTransformer
from interp.tokenizers import CharTokenizer, SymbolTokenizer
from interp.training.copied_segments import copied_segment_batch
from interp.training.induction_probes import induction_figures, position_minima
from interp.training.loop import fit
from interp.training.recipes import RECIPES, Recipe
from interp.training.text import VAL_FRACTION, default_text, split_text, text_batch, text_loss


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
        >>> from interp.training.text import default_text
        >>> threads = torch.get_num_threads()   # train() sets the recipe's thread count
        >>> my_corpus = default_text()[:3000]   # e.g. open("my_corpus.txt").read()
        >>> model = train("shakespeare-char", text=my_corpus, steps=2, batch_size=2,
        ...               progress=False)
        >>> torch.set_num_threads(threads)
        >>> model.cfg.d_vocab   # the characters of the text
        52
        >>> model.cfg.extra["val_loss"] > 0  # on the last 10% of the text
        True
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
