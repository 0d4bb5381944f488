"""The training loop: the learning-rate schedule, the AdamW optimizer with nanoGPT's weight
decay groups, and ``fit``, which trains a model in place on a stream of batches.

Example:
    >>> from interp.training.recipes import RECIPES
    >>> recipe = RECIPES["shakespeare-char"]   # warmup, then cosine decay to min_lr
    >>> [lr_at(step, recipe) for step in (0, recipe.warmup_steps - 1, recipe.steps)]
    [2e-05, 0.002, 0.0002]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.model import HookedTransformer
from interp.training.recipes import Recipe


def lr_at(step: int, recipe: Recipe) -> float:
    """Linear warmup, then cosine decay from ``lr`` to ``min_lr`` at the last step.

    Example:
        >>> from interp.training.recipes import RECIPES
        >>> lr_at(0, RECIPES["shakespeare-char"])   # lr / warmup_steps
        2e-05
    """
    if step < recipe.warmup_steps:
        return recipe.lr * (step + 1) / recipe.warmup_steps
    progress = (step - recipe.warmup_steps) / max(1, recipe.steps - recipe.warmup_steps)
    return recipe.min_lr + 0.5 * (recipe.lr - recipe.min_lr) * (1 + math.cos(math.pi * progress))


def make_optimizer(model: HookedTransformer, recipe: Recipe) -> torch.optim.AdamW:
    """AdamW with weight decay on the weight matrices (``W_*``, and grouped-query attention's
    stored ``_W_K``/``_W_V``) only, as in nanoGPT."""

    def is_matrix(name: str) -> bool:
        return name.split(".")[-1].lstrip("_").startswith("W_")

    matrices = [p for name, p in model.named_parameters() if is_matrix(name)]
    others = [p for name, p in model.named_parameters() if not is_matrix(name)]
    groups = [
        {"params": matrices, "weight_decay": recipe.weight_decay},
        {"params": others, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=recipe.lr, betas=recipe.betas, foreach=False)


def fit(
    model: HookedTransformer,
    recipe: Recipe,
    next_batch: Callable[
        [], tuple[Int[Tensor, "batch n_ctx+1"], Float[Tensor, "batch n_ctx"] | None]
    ],
    progress: bool = True,
) -> list[float]:
    """Train ``model`` in place for ``recipe.steps`` steps; the losses.

    ``next_batch()`` gives windows of ``n_ctx + 1`` tokens and an optional 0/1 mask over
    the ``n_ctx`` predictions: the model reads the first ``n_ctx`` tokens and predicts the
    last ``n_ctx`` (nanoGPT's x and y), so every position, the last included, is trained.
    (``model(window, return_type="loss")`` on ``n_ctx`` tokens would never train the last
    position: its embedding would stay random, and text sampled past ``n_ctx - 1`` tokens
    would turn to gibberish.)

    Example:
        >>> import dataclasses
        >>> from interp.config import HookedTransformerConfig
        >>> from interp.training.recipes import RECIPES
        >>> from interp.training.text import default_text, text_batch
        >>> text = default_text()[:5000]
        >>> alphabet = sorted(set(text))
        >>> tokens = torch.tensor([alphabet.index(char) for char in text])
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=32, n_heads=2, n_ctx=16,
        ...                               d_vocab=len(alphabet), act_fn="gelu")
        >>> model = HookedTransformer(cfg)   # random weights
        >>> recipe = dataclasses.replace(   # a few steps at a constant, high learning rate
        ...     RECIPES["shakespeare-char"], steps=5, warmup_steps=1, lr=1e-2, min_lr=1e-2)
        >>> gen = torch.Generator().manual_seed(0)
        >>> losses = fit(model, recipe, lambda: (text_batch(tokens, 8, cfg.n_ctx + 1, gen), None),
        ...              progress=False)
        >>> len(losses), losses[-1] < losses[0]
        (5, True)
    """
    optimizer = make_optimizer(model, recipe)
    losses = []
    model.train()
    bar = tqdm(range(recipe.steps), disable=not progress, desc="training", unit="step")
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, recipe)
        window, loss_mask = next_batch()  # [batch, n_ctx + 1], [batch, n_ctx] or None
        logits = model(window[:, :-1])  # [batch, n_ctx, d_vocab]
        if loss_mask is None:
            loss = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
        else:
            token_losses = F.cross_entropy(logits.transpose(1, 2), window[:, 1:], reduction="none")
            loss = (token_losses * loss_mask).sum() / loss_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if recipe.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
        losses.append(loss.item())
        if step % 10 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    return losses
