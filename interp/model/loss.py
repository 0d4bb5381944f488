"""The language-model loss: next-token cross-entropy over a batch of logits, with padding
left out.

Example:
    >>> loss = lm_cross_entropy_loss(model(tokens), tokens)   # mean over predicted tokens
    >>> per_token = lm_cross_entropy_loss(model(tokens), tokens, per_token=True)
    >>> per_token.shape   # [batch, pos - 1]: the last position predicts nothing here
    torch.Size([1, 20])
    >>> bool(per_token[0, 11:].mean() < 1 < per_token[0, :10].mean())   # the repeat is easy
    True
"""

from __future__ import annotations

from jaxtyping import Float, Int
from torch import Tensor


def lm_cross_entropy_loss(
    logits: Float[Tensor, "batch pos d_vocab"],
    tokens: Int[Tensor, "batch pos"],
    attention_mask: Int[Tensor, "batch pos"] | None = None,
    per_token: bool = False,
) -> Float[Tensor, ""] | Float[Tensor, "batch pos-1"]:
    """Next-token cross-entropy; padding positions are left out of the mean (and zero per token)."""
    if tokens.shape[1] < 2:
        raise ValueError("The loss needs at least two tokens (it predicts each next one).")
    log_probs = logits[:, :-1].float().log_softmax(dim=-1)
    losses = -log_probs.gather(-1, tokens[:, 1:, None])[..., 0]  # [batch, pos - 1]
    if attention_mask is None:
        return losses if per_token else losses.mean()
    counted = (attention_mask[:, 1:] * attention_mask[:, :-1]).to(losses.dtype)
    losses = losses * counted
    return losses if per_token else losses.sum() / counted.sum()
