"""The pieces of a GPT-2 transformer, each exposing its activations through hook points.

Written afresh from the seeds in ../shared/seeds, without their defects: the causal mask is
built on the scores' own device (no buffer created on "cuda"), and the hooked score tensor
is never masked in place.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint
from interp.kv_cache import KeyValueCacheEntry


def affine(
    x: Float[Tensor, "... d_in"], weight: Float[Tensor, "d_in d_out"], bias: Float[Tensor, " d_out"]
) -> Float[Tensor, "... d_out"]:
    """``x @ weight + bias`` as one fused matrix multiply-add."""
    flat = torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight)
    return flat.view(*x.shape[:-1], weight.shape[-1])


def gelu_fast(x: Tensor) -> Tensor:
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


ACTIVATIONS = {
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu": F.gelu,
    "relu": F.relu,
    "gelu_fast": gelu_fast,
    "silu": F.silu,
}


def _config(cfg: HookedTransformerConfig | dict) -> HookedTransformerConfig:
    """A config from a config or its dict (TransformerLens's components accept both)."""
    return (
        cfg if isinstance(cfg, HookedTransformerConfig) else HookedTransformerConfig.from_dict(cfg)
    )


class LayerNorm(nn.Module):
    """Layer norm whose scale (the root-mean-square after centring) is a hook point.

    ``normalization_type="LNPre"`` has no weight or bias: they were folded into the next layer.
    """

    def __init__(self, cfg: HookedTransformerConfig | dict, length: int | None = None) -> None:
        super().__init__()
        cfg = _config(cfg)
        self.eps = cfg.eps
        self.length = cfg.d_model if length is None else length
        if cfg.normalization_type == "LN":
            self.w = nn.Parameter(torch.ones(self.length, dtype=cfg.dtype))
            self.b = nn.Parameter(torch.zeros(self.length, dtype=cfg.dtype))
        else:
            self.w = self.b = None
        self.hook_scale = HookPoint()  # [batch, pos, 1]
        self.hook_normalized = HookPoint()  # [batch, pos, d_model]

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        if not (self.hook_scale.has_hooks or self.hook_normalized.has_hooks):
            return F.layer_norm(x, x.shape[-1:], self.w, self.b, self.eps)
        input_dtype = x.dtype
        x = x if x.dtype in (torch.float32, torch.float64) else x.float()
        w, b = (self.w.to(x.dtype), self.b.to(x.dtype)) if self.w is not None else (None, None)
        normalized, mean, rstd = torch.native_layer_norm(x, x.shape[-1:], w, b, self.eps)
        scale = self.hook_scale(rstd.reciprocal())  # [batch, pos, 1]: sqrt(variance + eps)
        if not self.hook_scale.only_read:  # a hook may change the scale: divide by what it gave
            normalized = (x - mean) / scale
            if w is not None:
                normalized = torch.addcmul(b, normalized, w)
        return self.hook_normalized(normalized.to(input_dtype))


class LayerNormPre(LayerNorm):
    """TransformerLens's ``LayerNormPre``: centre and divide by the scale, no weight or bias
    (they were folded into the next layer). ``hook_scale`` is [batch, pos, 1].

    Example:
        >>> LayerNormPre(cfg)(x)   # == F.layer_norm(x, (d_model,), eps=cfg.eps)
    """

    def __init__(self, cfg: HookedTransformerConfig | dict) -> None:
        cfg = _config(cfg)
        super().__init__(dataclasses.replace(cfg, normalization_type="LNPre"))


class RMSNormPre(nn.Module):
    """TransformerLens's ``RMSNormPre``: ``x / sqrt(mean(x²) + eps)``, no weight; computed in
    float32 for half-precision configs. ``hook_scale`` is [batch, pos, 1].

    Example:
        >>> RMSNormPre(cfg)(x)   # x / (x.pow(2).mean(-1, keepdim=True) + cfg.eps).sqrt()
    """

    def __init__(self, cfg: HookedTransformerConfig | dict) -> None:
        super().__init__()
        self.cfg = _config(cfg)
        self.eps = self.cfg.eps
        self.hook_scale = HookPoint()  # [batch, pos, 1]
        self.hook_normalized = HookPoint()  # [batch, pos, length]

    def normalize(self, x: Float[Tensor, "... length"]) -> Float[Tensor, "... length"]:
        if self.cfg.dtype not in (torch.float32, torch.float64):
            x = x.float()
        scale = self.hook_scale((x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt())
        return self.hook_normalized(x / scale).to(self.cfg.dtype)

    def forward(self, x: Float[Tensor, "... length"]) -> Float[Tensor, "... length"]:
        return self.normalize(x)


class RMSNorm(RMSNormPre):
    """TransformerLens's ``RMSNorm`` (LLaMA's norm): ``RMSNormPre`` times a weight ``w``
    (``[length]``, ``d_model`` by default). ``hook_normalized`` is before the weight.

    Example:
        >>> RMSNorm(cfg)(x)   # == transformers' LlamaRMSNorm with the same weight
    """

    def __init__(self, cfg: HookedTransformerConfig | dict, length: int | None = None) -> None:
        super().__init__(cfg)
        self.length = self.cfg.d_model if length is None else length
        self.w = nn.Parameter(torch.ones(self.length, dtype=self.cfg.dtype))

    def forward(self, x: Float[Tensor, "... length"]) -> Float[Tensor, "... length"]:
        return self.normalize(x) * self.w


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


class MLP(nn.Module):
    def __init__(self, cfg: HookedTransformerConfig) -> None:
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp, dtype=cfg.dtype))
        self.b_in = nn.Parameter(torch.zeros(cfg.d_mlp, dtype=cfg.dtype))
        self.W_out = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model, dtype=cfg.dtype))
        self.b_out = nn.Parameter(torch.zeros(cfg.d_model, dtype=cfg.dtype))
        self.act_fn = ACTIVATIONS[cfg.act_fn]
        self.hook_pre = HookPoint()  # [batch, pos, d_mlp]
        self.hook_post = HookPoint()  # [batch, pos, d_mlp]

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        pre = self.hook_pre(affine(x, self.W_in, self.b_in))
        post = self.hook_post(self.act_fn(pre))
        return affine(post, self.W_out, self.b_out)


class Unembed(nn.Module):
    def __init__(self, cfg: HookedTransformerConfig) -> None:
        super().__init__()
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab_out, dtype=cfg.dtype))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab_out, dtype=cfg.dtype))

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_vocab"]:
        return affine(x, self.W_U, self.b_U)


# Opt-in hook points: config flag -> (the module that holds them, their names).
# hook_attn_in and the q/k/v inputs are [batch, pos, n_heads, d_model]; hook_mlp_in is
# [batch, pos, d_model]; hook_result is [batch, pos, n_heads, d_model].
OPT_IN_HOOKS = {
    "use_attn_result": ("attn", ("hook_result",)),
    "use_attn_in": ("block", ("hook_attn_in",)),
    "use_split_qkv_input": ("block", ("hook_q_input", "hook_k_input", "hook_v_input")),
    "use_hook_mlp_in": ("block", ("hook_mlp_in",)),
}


class TransformerBlock(nn.Module):
    """resid_pre -> (+ attention) resid_mid -> (+ MLP) resid_post; attention-only skips the MLP."""

    def __init__(self, cfg: HookedTransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.ln1 = LayerNorm(cfg) if cfg.normalization_type else nn.Identity()
        self.attn = Attention(cfg)
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.hook_attn_out = HookPoint()  # [batch, pos, d_model]
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]
        if not cfg.attn_only:
            self.ln2 = LayerNorm(cfg) if cfg.normalization_type else nn.Identity()
            self.mlp = MLP(cfg)
            self.hook_resid_mid = HookPoint()  # [batch, pos, d_model]
            self.hook_mlp_out = HookPoint()  # [batch, pos, d_model]
        self.sync_opt_in_hooks()

    def sync_opt_in_hooks(self) -> None:
        """Create the opt-in hook points whose config flag is on and drop the others."""
        for flag, (owner, names) in OPT_IN_HOOKS.items():
            module = self.attn if owner == "attn" else self
            wanted = getattr(self.cfg, flag) and not (
                flag == "use_hook_mlp_in" and self.cfg.attn_only
            )
            for name in names:
                if wanted and not hasattr(module, name):
                    module.add_module(name, HookPoint())
                elif not wanted and hasattr(module, name):
                    delattr(module, name)

    def forward(
        self,
        resid_pre: Float[Tensor, "batch pos d_model"],
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None = None,
        past_kv: KeyValueCacheEntry | None = None,
        allowed_keys: Bool[Tensor, "batch_or_1 1 pos key_pos"] | None = None,
        output_positions: Int[Tensor, " n_out"] | None = None,
    ) -> Float[Tensor, "batch pos_or_n_out d_model"]:
        """The block on ``resid_pre``, attending to ``past_kv`` then to these positions.

        ``allowed_keys`` replaces the causal (and padding) rule of which keys each position
        may attend to (see ``Attention.forward``). With ``output_positions``, only those
        positions are computed past the keys and values (queries, attention output, MLP),
        and the result is [batch, n_out, d_model]; the other positions only supply keys and
        values. ``hook_q`` and every hook after the attention then see the output positions
        only.
        """
        resid_pre = self.hook_resid_pre(resid_pre)
        attn_in = resid_pre
        if self.cfg.use_attn_in or self.cfg.use_split_qkv_input:
            attn_in = resid_pre[:, :, None, :].expand(-1, -1, self.cfg.n_heads, -1)
        if self.cfg.use_attn_in:
            attn_in = self.hook_attn_in(attn_in.clone())
        if self.cfg.use_split_qkv_input:
            query_input = self.ln1(self.hook_q_input(attn_in.clone()))
            key_input = self.ln1(self.hook_k_input(attn_in.clone()))
            value_input = self.ln1(self.hook_v_input(attn_in.clone()))
        else:  # one input shared by q, k and v: normalise it once
            query_input = key_input = value_input = self.ln1(attn_in)
        if output_positions is not None:
            if allowed_keys is None:
                n_pos = resid_pre.shape[1]
                past_len = past_kv.length if past_kv is not None else 0
                allowed_keys = self.attn.attention_mask(
                    n_pos, past_len + n_pos, key_padding_mask, resid_pre.device
                )
            allowed_keys = allowed_keys[:, :, output_positions]
            query_input = query_input[:, output_positions]
            resid_pre = resid_pre[:, output_positions]
        attn_out = self.attn(
            query_input, key_input, value_input, key_padding_mask, past_kv, allowed_keys
        )
        attn_out = self.hook_attn_out(attn_out)
        if self.cfg.attn_only:
            return self.hook_resid_post(resid_pre + attn_out)

        resid_mid = self.hook_resid_mid(resid_pre + attn_out)
        mlp_in = self.hook_mlp_in(resid_mid.clone()) if self.cfg.use_hook_mlp_in else resid_mid
        mlp_out = self.hook_mlp_out(self.mlp(self.ln2(mlp_in)))
        return self.hook_resid_post(resid_mid + mlp_out)
