"""Token and learned position embeddings, and the unembedding back to the vocabulary."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.components.activations import affine
from interp.config import HookedTransformerConfig


class Embed(nn.Module):
    def __init__(self, cfg: HookedTransformerConfig) -> None:
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model, dtype=cfg.dtype))

    def forward(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_model"]:
        return F.embedding(tokens, self.W_E)


class PosEmbed(nn.Module):
    def __init__(self, cfg: HookedTransformerConfig) -> None:
        super().__init__()
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model, dtype=cfg.dtype))

    def forward(self, positions: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_model"]:
        return F.embedding(positions, self.W_pos)


class Unembed(nn.Module):
    """The logits ``x @ W_U + b_U``, soft-capped to ``cap * tanh(logits / cap)`` when
    ``cfg.output_logits_soft_cap`` is positive (Gemma 2), so every caller of ``unembed`` (the
    forward pass, generation, the logit lens) gets the model's own logits.

    Example:
        >>> model.unembed(model.ln_final(resid)).shape   # [batch, pos, d_vocab_out]
    """

    def __init__(self, cfg: HookedTransformerConfig) -> None:
        super().__init__()
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab_out, dtype=cfg.dtype))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab_out, dtype=cfg.dtype))
        self.soft_cap = cfg.output_logits_soft_cap

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_vocab"]:
        logits = affine(x, self.W_U, self.b_U)
        if self.soft_cap > 0:
            logits = torch.tanh(logits / self.soft_cap) * self.soft_cap
        return logits
