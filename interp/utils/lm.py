"""Next-token metrics with TransformerLens's names (the loss itself lives with the model)."""

from __future__ import annotations

from jaxtyping import Bool, Float, Int
from torch import Tensor


def lm_accuracy(
    logits: Float[Tensor, "batch pos d_vocab"],
    tokens: Int[Tensor, "batch pos"],
    per_token: bool = False,
) -> Float[Tensor, ""] | Bool[Tensor, "batch pos-1"]:
    """How often the top logit is the next token: a fraction, or per position (``[batch,
    pos - 1]`` booleans) with ``per_token``.

    Example:
        >>> lm_accuracy(model(tokens), tokens)   # 9 of the 10 repeated tokens, none before
        tensor(0.4500)
        >>> lm_accuracy(model(tokens), tokens, per_token=True).shape   # [batch, pos - 1]
        torch.Size([1, 20])
    """
    correct = logits.argmax(dim=-1)[:, :-1] == tokens[:, 1:]
    return correct if per_token else correct.sum() / correct.numel()
