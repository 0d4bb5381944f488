"""Multi-head causal self-attention, with a fused path and an explicit, hookable one.

Written afresh from the seeds in ../shared/seeds, without their defects: the causal mask is
built on the scores' own device (no buffer created on "cuda"), and the hooked score tensor
is never masked in place.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor, nn

from interp.components.activations import affine
from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint
from interp.kv_cache import KeyValueCacheEntry


class Attention(nn.Module):
    """Multi-head causal self-attention with per-head weights.

    When neither the scores nor the pattern is hooked, the pattern is never materialised:
    ``scaled_dot_product_attention`` (flash / memory-efficient kernels on a GPU) runs instead.
    """

    def __init__(self, cfg: HookedTransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        h, m, d = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_Q = nn.Parameter(torch.empty(h, m, d, dtype=cfg.dtype))
        self.W_K = nn.Parameter(torch.empty(h, m, d, dtype=cfg.dtype))
        self.W_V = nn.Parameter(torch.empty(h, m, d, dtype=cfg.dtype))
        self.W_O = nn.Parameter(torch.empty(h, d, m, dtype=cfg.dtype))
        self.b_Q = nn.Parameter(torch.zeros(h, d, dtype=cfg.dtype))
        self.b_K = nn.Parameter(torch.zeros(h, d, dtype=cfg.dtype))
        self.b_V = nn.Parameter(torch.zeros(h, d, dtype=cfg.dtype))
        self.b_O = nn.Parameter(torch.zeros(m, dtype=cfg.dtype))
        self.hook_q = HookPoint()  # [batch, pos, n_heads, d_head]
        self.hook_k = HookPoint()  # [batch, pos, n_heads, d_head]
        self.hook_v = HookPoint()  # [batch, pos, n_heads, d_head]
        self.hook_attn_scores = HookPoint()  # [batch, n_heads, query_pos, key_pos]
        self.hook_pattern = HookPoint()  # [batch, n_heads, query_pos, key_pos]
        self.hook_z = HookPoint()  # [batch, pos, n_heads, d_head]
        # hook_result [batch, pos, n_heads, d_model] exists when cfg.use_attn_result is on.

    def project(
        self,
        x: Float[Tensor, "batch pos d_model"] | Float[Tensor, "batch pos n_heads d_model"],
        weight: Float[Tensor, "n_heads d_model d_head"],
        bias: Float[Tensor, "n_heads d_head"],
    ) -> Float[Tensor, "batch pos n_heads d_head"]:
        """One of q, k, v for every head; per-head inputs (split qkv) have a head axis."""
        if x.ndim == 4:
            return torch.einsum("bphm,hmd->bphd", x, weight) + bias
        # A batched matmul over heads reads the [n_heads, d_model, d_head] weight as it is
        # stored: no per-forward copy into a [d_model, n_heads * d_head] matrix. The input is
        # broadcast over heads (stride 0), and the bias is fused into the multiply-add.
        h, m, d = weight.shape
        batch, pos = x.shape[:2]
        flat_x = x.reshape(1, batch * pos, m).expand(h, -1, -1)
        per_head = torch.baddbmm(bias[:, None, :], flat_x, weight)  # [n_heads, batch*pos, d_head]
        return per_head.view(h, batch, pos, d).permute(1, 2, 0, 3)  # a view, no copy

    def forward(
        self,
        query_input: Tensor,
        key_input: Tensor,
        value_input: Tensor,
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None = None,
        past_kv: KeyValueCacheEntry | None = None,
        allowed_keys: Bool[Tensor, "batch_or_1 1 query_pos key_pos"] | None = None,
    ) -> Float[Tensor, "batch query_pos d_model"]:
        """Queries from ``query_input``, keys and values from ``past_kv`` then ``key_input``
        and ``value_input``. By default the queries are the last positions and attend
        causally (and not to padding keys); ``allowed_keys`` replaces that rule: True where
        a query may attend to a key (each query must be allowed at least one key)."""
        q = self.hook_q(self.project(query_input, self.W_Q, self.b_Q))
        k = self.hook_k(self.project(key_input, self.W_K, self.b_K))
        v = self.hook_v(self.project(value_input, self.W_V, self.b_V))
        if past_kv is not None:
            k, v = past_kv.extend(k, v)

        if self.cfg.use_fast_attention and not (
            self.hook_attn_scores.has_hooks or self.hook_pattern.has_hooks
        ):
            z = self.fast_attention(q, k, v, key_padding_mask, allowed_keys)
        else:
            mask = allowed_keys
            if mask is None:
                mask = self.attention_mask(q.shape[1], k.shape[1], key_padding_mask, q.device)
            z = self.explicit_attention(q, k, v, mask, key_padding_mask is not None)
        z = self.hook_z(z)  # [batch, query_pos, n_heads, d_head]

        if self.cfg.use_attn_result:
            result = self.hook_result(torch.einsum("bqhd,hdm->bqhm", z, self.W_O))
            return result.sum(dim=2) + self.b_O
        h, d, m = self.W_O.shape
        return affine(z.reshape(*z.shape[:2], h * d), self.W_O.reshape(h * d, m), self.b_O)

    @staticmethod
    def attention_mask(
        query_len: int,
        key_len: int,
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None,
        device: torch.device,
    ) -> Bool[Tensor, "batch_or_1 1 query_pos key_pos"]:
        """True where a query may attend to a key: causal, and the key is not padding.

        Queries are the last ``query_len`` of ``key_len`` positions (earlier ones are cached).
        """
        query_pos = torch.arange(key_len - query_len, key_len, device=device)
        key_pos = torch.arange(key_len, device=device)
        allowed = (key_pos[None, :] <= query_pos[:, None])[None, None]
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        return allowed

    def explicit_attention(
        self,
        q: Float[Tensor, "batch query_pos n_heads d_head"],
        k: Float[Tensor, "batch key_pos n_heads d_head"],
        v: Float[Tensor, "batch key_pos n_heads d_head"],
        mask: Bool[Tensor, "batch_or_1 1 query_pos key_pos"],
        padded: bool,
    ) -> Float[Tensor, "batch query_pos n_heads d_head"]:
        """Scores and pattern as tensors that hooks can read and overwrite.

        The matmuls run head-major, [n_heads, batch, ...], the layout ``project`` produces, so
        they read q, k and v without copies; hooks see [batch, n_heads, ...] views of it.
        """
        scores = torch.matmul(q.permute(2, 0, 1, 3), k.permute(2, 0, 3, 1)).transpose(0, 1)
        scores = scores.div_(math.sqrt(self.cfg.d_head)).masked_fill_(~mask, float("-inf"))
        scores = self.hook_attn_scores(scores)  # [batch, n_heads, query_pos, key_pos]
        # Softmax copies a non-contiguous input, so it runs on the head-major layout too.
        pattern = scores.transpose(0, 1).float().softmax(dim=-1).transpose(0, 1)
        if padded:  # a padding query that sees only padding keys attends to nothing
            pattern = pattern.nan_to_num(0.0)
        pattern = self.hook_pattern(pattern.to(v.dtype))  # [batch, n_heads, query_pos, key_pos]
        z = torch.matmul(pattern.transpose(0, 1), v.permute(2, 0, 1, 3))  # [h, b, q, d_head]
        return z.permute(1, 2, 0, 3)

    def fast_attention(
        self,
        q: Float[Tensor, "batch query_pos n_heads d_head"],
        k: Float[Tensor, "batch key_pos n_heads d_head"],
        v: Float[Tensor, "batch key_pos n_heads d_head"],
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None,
        allowed_keys: Bool[Tensor, "batch_or_1 1 query_pos key_pos"] | None = None,
    ) -> Float[Tensor, "batch query_pos n_heads d_head"]:
        """The same result through ``scaled_dot_product_attention``; a mask tensor is built
        only when the causal flag cannot express it (padding, or some keys already cached)."""
        query_len, key_len = q.shape[1], k.shape[1]
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [batch, n_heads, pos, d_head]
        if allowed_keys is None and key_padding_mask is None and query_len == key_len:
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif allowed_keys is None and key_padding_mask is None and query_len == 1:
            z = F.scaled_dot_product_attention(q, k, v)  # one new query sees every key
        else:
            mask = allowed_keys
            if mask is None:
                mask = self.attention_mask(query_len, key_len, key_padding_mask, q.device)
            z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            if key_padding_mask is not None:  # a query that sees only padding attends to nothing
                z = z.nan_to_num(0.0)
        return z.transpose(1, 2)
