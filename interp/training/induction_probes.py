"""Induction probes: per-head induction and previous-token scores on BOS + random tokens
repeated once, averaged over positions and per position (the model card's figures).

Example:
    >>> induction_figures(interp.load_model("attn-only-2l"))["induction_scores"]
    [[0.0...], [0.95...]]
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.model import HookedTransformer


def repeated_sequence(
    batch_size: int, half_length: int, d_vocab: int, seed: int
) -> Int[Tensor, "batch 1+2*half_length"]:
    """BOS, then ``half_length`` random tokens twice: the standard induction probe.

    Example:
        >>> repeated_sequence(1, 3, 10, seed=0).shape
        torch.Size([1, 7])
    """
    generator = torch.Generator().manual_seed(seed)
    half = torch.randint(0, d_vocab - 1, (batch_size, half_length), generator=generator)
    bos = torch.full((batch_size, 1), d_vocab - 1)
    return torch.cat([bos, half, half], dim=1)


@torch.no_grad()
def induction_figures(
    model: HookedTransformer, half_length: int = 25, batch_size: int = 200, seed: int = 1234
) -> dict[str, Any]:
    """Per-head induction and previous-token scores [n_layers][n_heads] and the loss on the
    second copy, on BOS + ``half_length`` random tokens repeated once.

    The induction score is the mean attention from a second-copy token to the token after
    its first occurrence; the previous-token score, the mean attention to the token just
    before (over every position after the first).

    Example:
        >>> figures = induction_figures(interp.load_model("attn-only-2l"))
        >>> sorted(figures)
        ['induction_scores', 'previous_token_scores', 'second_copy_loss']
        >>> [round(score, 2) for score in figures["induction_scores"][1]]   # L1H0
        [0.95]
    """
    tokens = repeated_sequence(batch_size, half_length, model.cfg.d_vocab, seed)
    logits, cache = model.run_with_cache(tokens, names_filter=lambda name: "pattern" in name)
    second_copy = torch.arange(1 + half_length, 1 + 2 * half_length)  # query positions
    after_first = second_copy - half_length + 1
    query = torch.arange(1, tokens.shape[1])
    induction, previous = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]  # [batch, head, query_pos, key_pos]
        induction.append(pattern[:, :, second_copy, after_first].mean((0, 2)).tolist())
        previous.append(pattern[:, :, query, query - 1].mean((0, 2)).tolist())
    log_probs = logits[:, :-1].log_softmax(-1).gather(-1, tokens[:, 1:, None])[..., 0]
    losses = -log_probs  # [batch, pos - 1]; entry i predicts token i + 1
    second_copy_loss = losses[:, 1 + half_length : 2 * half_length].mean().item()
    return {
        "induction_scores": induction,
        "previous_token_scores": previous,
        "second_copy_loss": second_copy_loss,
    }


# The per-position probes of the model card: the issue-13 probe (BOS + 31 tokens twice, 63
# tokens) and one that fills a 64-token context (BOS + 32 tokens, then the first 31 again).
POSITION_PROBES = ((31, None), (32, 64))  # (half_length, length)


@torch.no_grad()
def position_scores(
    model: HookedTransformer,
    half_length: int,
    length: int | None = None,
    batch_size: int = 500,
    seed: int = 1234,
) -> tuple[Float[Tensor, "n_layers n_heads n_query"], Float[Tensor, "n_layers n_heads n_second"]]:
    """Per-position previous-token and induction scores of every head on BOS +
    ``half_length`` random tokens twice, cut to ``length`` tokens (default: all of them).

    ``previous[l, h, i]`` is the mean attention from position ``i + 1`` to position ``i``;
    ``induction[l, h, i]`` the mean attention from second-copy position ``1 + half_length + i``
    to the token after its first occurrence. A head that works only on part of the context
    has a high mean score and a low minimum over positions.

    Example:
        >>> previous, induction = position_scores(interp.load_model("attn-only-2l"), 32, 64)
        >>> previous.shape, induction.shape   # [n_layers, n_heads, 63], [n_layers, n_heads, 31]
        (torch.Size([2, 1, 63]), torch.Size([2, 1, 31]))
        >>> previous[0, 0].min() > 0.8, induction[1, 0].min() > 0.8  # L0H0, L1H0 everywhere
        (tensor(True), tensor(True))
    """
    tokens = repeated_sequence(batch_size, half_length, model.cfg.d_vocab, seed)[:, :length]
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: "pattern" in name)
    query = torch.arange(1, tokens.shape[1])
    second_copy = torch.arange(1 + half_length, tokens.shape[1])
    patterns = torch.stack([cache["pattern", layer] for layer in range(model.cfg.n_layers)])
    # patterns: [n_layers, batch, head, query_pos, key_pos]
    previous = patterns[..., query, query - 1].mean(1)
    induction = patterns[..., second_copy, second_copy - half_length + 1].mean(1)
    return previous, induction


def position_minima(model: HookedTransformer) -> list[dict[str, Any]]:
    """For each of ``POSITION_PROBES``, each head's minimum over positions of its previous-token
    and induction scores [n_layers][n_heads] (see ``position_scores``).

    Example:
        >>> position_minima(interp.load_model("attn-only-2l"))[1]["previous_token_scores"][0]
        [0.9...]
    """
    minima = []
    for half_length, length in POSITION_PROBES:
        previous, induction = position_scores(model, half_length, length)
        minima.append(
            {
                "half_length": half_length,
                "length": 1 + 2 * half_length if length is None else length,
                "previous_token_scores": previous.amin(-1).tolist(),
                "induction_scores": induction.amin(-1).tolist(),
            }
        )
    return minima
