"""Choosing the next token from logits: greedy, temperature, top-k and top-p (nucleus)."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor


def sample_next_token(
    logits: Float[Tensor, "batch d_vocab"],
    do_sample: bool = True,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Int[Tensor, " batch"]:
    """One token per row: the argmax when ``do_sample`` is False or ``temperature`` is 0,
    else a sample from the softmax of ``logits / temperature`` restricted to the ``top_k``
    most likely tokens and to the smallest set whose probability reaches ``top_p``.

    Example:
        >>> sample_next_token(torch.tensor([[0.0, 5.0, 1.0]]), do_sample=False)
        tensor([1])
    """
    if not do_sample or temperature == 0:
        return logits.argmax(dim=-1)
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}.")
    logits = logits.float() / temperature
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}.")
        kth_largest = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    if top_p is not None:
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}.")
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # Drop a token when the tokens ranked above it already reach top_p.
        drop_sorted = (cumulative - sorted_logits.softmax(dim=-1)) >= top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]
