"""Token and learned position embeddings, and the unembedding back to the vocabulary."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.components.activations import affine
from interp.components.norms import LayerNorm
from interp.config import HookedTransformerConfig
from interp.utils.tensors import get_offset_position_ids


class Embed(nn.Module):
    """The token embeddings ``W_E[tokens]``; with ``cfg.post_embedding_ln`` (BLOOM) then a
    layer norm, ``embed.ln``, as TransformerLens's.

    Example:
        >>> model.embed(tokens).shape   # [batch, pos, d_model]
        torch.Size([1, 21, 128])
    """

    def __init__(self, cfg: HookedTransformerConfig | dict) -> None:
        super().__init__()
        cfg = HookedTransformerConfig.unwrap(cfg)
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model, dtype=cfg.dtype))
        if cfg.post_embedding_ln:
            self.ln = LayerNorm(cfg)

    def forward(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_model"]:
        if hasattr(self, "ln"):
            return self.ln(F.embedding(tokens, self.W_E))
        return F.embedding(tokens, self.W_E)


class PosEmbed(nn.Module):
    """Learned position embeddings ``W_pos`` [n_ctx, d_model], called as TransformerLens's.

    Example:
        >>> model.pos_embed(tokens).shape   # W_pos[:pos] for each row: [batch, pos, d_model]
        torch.Size([1, 21, 128])
        >>> mask = torch.tensor([[0, 1, 1, 1]])   # one left-padded row: 3 cached, 1 new
        >>> new = model.pos_embed(tokens[:, :1], past_kv_pos_offset=3, attention_mask=mask)
        >>> torch.equal(new[0, 0], model.W_pos[2])   # the third real token: position 2
        True
    """

    def __init__(self, cfg: HookedTransformerConfig | dict) -> None:
        super().__init__()
        cfg = HookedTransformerConfig.unwrap(cfg)
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model, dtype=cfg.dtype))

    def forward(
        self,
        tokens: Int[Tensor, "batch pos"],
        past_kv_pos_offset: int = 0,
        attention_mask: Int[Tensor, "batch offset_pos"] | None = None,
    ) -> Float[Tensor, "batch pos d_model"]:
        """The embeddings of the positions of ``tokens``, which follow ``past_kv_pos_offset``
        cached ones. Without ``attention_mask`` that is ``W_pos[offset : offset + pos]`` for
        every row (one copy, broadcast over the batch). With it (1 = token, 0 = padding,
        over cached plus new positions) each row's positions count its tokens, so left
        padding shifts a text to start at 0, and padding gets zeros, as in TransformerLens.
        """
        batch, n_pos = tokens.shape[0], tokens.shape[-1]
        if attention_mask is None:  # a copy, so a hook editing it in place leaves W_pos be
            rows = self.W_pos[past_kv_pos_offset : past_kv_pos_offset + n_pos].clone()
            return rows[None].expand(batch, -1, -1)
        positions = get_offset_position_ids(past_kv_pos_offset, attention_mask)
        is_padding = attention_mask[:, past_kv_pos_offset : past_kv_pos_offset + n_pos] == 0
        return F.embedding(positions, self.W_pos).masked_fill(is_padding[..., None], 0.0)


class Unembed(nn.Module):
    """The logits ``x @ W_U + b_U``, soft-capped to ``cap * tanh(logits / cap)`` when
    ``cfg.output_logits_soft_cap`` is positive (Gemma 2), so every caller of ``unembed`` (the
    forward pass, generation, the logit lens) gets the model's own logits.

    Example:
        >>> resid = cache["resid_post", -1]   # [batch, pos, d_model]
        >>> model.unembed(model.ln_final(resid)).shape   # [batch, pos, d_vocab_out]
        torch.Size([1, 21, 512])
    """

    def __init__(self, cfg: HookedTransformerConfig | dict) -> None:
        super().__init__()
        cfg = HookedTransformerConfig.unwrap(cfg)
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab_out, dtype=cfg.dtype))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab_out, dtype=cfg.dtype))
        self.cfg = cfg  # the cap is read each forward, so setting it on the config applies

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_vocab"]:
        logits = affine(x, self.W_U, self.b_U)
        cap = self.cfg.output_logits_soft_cap
        if cap > 0:
            logits = torch.tanh(logits / cap) * cap
        return logits
