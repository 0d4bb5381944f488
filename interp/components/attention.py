"""Self-attention (causal, or bidirectional for encoders), with a fused path and an
explicit, hookable one.

One module covers every family, chosen by the config: grouped-query heads
(``n_key_value_heads``), query/key RMS norms (``use_qk_norm``: per head, or across heads
with ``qk_norm_across_heads``), rotary embeddings,
the score divisor ``attn_scale``, soft-capped scores, a sliding window on "local" layers and
attention sinks (``use_attn_sinks``: gpt-oss's learned logit per head, ``W_sinks``, in every
softmax; such models always take the explicit path).
The causal mask is built on the scores' own device, and the hooked score tensor is never
masked in place.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from interp.components.activations import affine, bias_is_skippable
from interp.components.norms import RMSNorm
from interp.components.rotary import RotaryEmbedding
from interp.components.tl_buffers import check_tl_buffers, pop_tl_buffers, save_tl_buffers
from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint
from interp.utils.tensors import get_offset_position_ids

if TYPE_CHECKING:  # a type only: the KV cache lives in interp.cache, which imports these
    from interp.cache.kv_cache import KeyValueCacheEntry

# With grouped-query attention the keys' and values' weights are stored per key/value head
# as ``_W_K``/``_W_V``/``_b_K``/``_b_V``; these names read them expanded to every query head.
_GROUPED = ("W_K", "W_V", "b_K", "b_V")


def _at_least_float32(dtype: torch.dtype) -> torch.dtype:
    """The dtype a softmax (or half-precision scores) runs in: float32 for half precision,
    the model's own dtype when it is wider (float64 models keep their precision)."""
    return torch.promote_types(dtype, torch.float32)


class Attention(nn.Module):
    """Multi-head self-attention with per-head weights, layer ``layer_index`` of a model:
    causal, or bidirectional with ``cfg.attention_dir="bidirectional"``.

    When neither the scores nor the pattern is hooked and the scores are not soft-capped,
    the pattern is never materialised: ``scaled_dot_product_attention`` (flash /
    memory-efficient kernels on a GPU) runs instead.

    With ``n_key_value_heads < n_heads`` (grouped-query attention) the key and value weights
    are ``_W_K``/``_W_V`` [n_key_value_heads, d_model, d_head] and ``_b_K``/``_b_V``;
    ``W_K``/``W_V``/``b_K``/``b_V`` read them repeated to [n_heads, ...] (query head ``i``
    uses key/value head ``i // (n_heads / n_key_value_heads)``), as TransformerLens does.

    The constructor takes TransformerLens's arguments: ``attn_type`` ("global" or "local";
    default: layer ``layer_id``'s entry of ``cfg.attn_types``) and ``layer_id``.

    Example:
        >>> attn = Attention(model.cfg, layer_id=1)   # weights empty until a model inits them
        >>> _ = attn.load_state_dict(model.blocks[1].attn.state_dict())
        >>> x = torch.randn(2, 5, model.cfg.d_model)
        >>> out = attn(x, x, x)   # TransformerLens's call: query, key and value inputs
        >>> out.shape   # [batch, pos, d_model]
        torch.Size([2, 5, 128])
    """

    def __init__(
        self,
        cfg: HookedTransformerConfig | dict,
        attn_type: str | None = None,
        layer_id: int | None = None,
    ) -> None:
        super().__init__()
        cfg = HookedTransformerConfig.unwrap(cfg)
        self.cfg = cfg
        self.layer_index = layer_index = 0 if layer_id is None else layer_id
        h, m, d = cfg.n_heads, cfg.d_model, cfg.d_head
        self.n_key_value_heads = cfg.n_key_value_heads or h
        self.grouped = self.n_key_value_heads != h
        if attn_type is None:
            attn_type = cfg.attn_types[layer_index] if cfg.use_local_attn else "global"
        if attn_type not in ("global", "local") or (attn_type == "local" and not cfg.window_size):
            raise ValueError(
                f"attn_type={attn_type!r} must be 'global' or 'local' (a local layer needs "
                f"cfg.window_size, got {cfg.window_size!r})."
            )
        # Keys a "local" layer's query sees: itself and the window_size - 1 before it.
        is_local = attn_type == "local"
        self.window_size = cfg.window_size if is_local else None
        self.bidirectional = cfg.attention_dir == "bidirectional"

        kv = self.n_key_value_heads
        kv_prefix = "_" if self.grouped else ""
        self.W_Q = nn.Parameter(torch.empty(h, m, d, dtype=cfg.dtype))
        self.register_parameter(
            f"{kv_prefix}W_K", nn.Parameter(torch.empty(kv, m, d, dtype=cfg.dtype))
        )
        self.register_parameter(
            f"{kv_prefix}W_V", nn.Parameter(torch.empty(kv, m, d, dtype=cfg.dtype))
        )
        self.W_O = nn.Parameter(torch.empty(h, d, m, dtype=cfg.dtype))
        self.b_Q = nn.Parameter(torch.zeros(h, d, dtype=cfg.dtype))
        self.register_parameter(
            f"{kv_prefix}b_K", nn.Parameter(torch.zeros(kv, d, dtype=cfg.dtype))
        )
        self.register_parameter(
            f"{kv_prefix}b_V", nn.Parameter(torch.zeros(kv, d, dtype=cfg.dtype))
        )
        self.b_O = nn.Parameter(torch.zeros(m, dtype=cfg.dtype))
        if cfg.use_qk_norm:  # per head, over d_head; or over every head at once (OLMo 2)
            across = cfg.qk_norm_across_heads
            self.q_norm = RMSNorm(cfg, length=h * d if across else d)
            self.k_norm = RMSNorm(cfg, length=self.n_key_value_heads * d if across else d)
        if cfg.use_attn_sinks:  # gpt-oss: each head's softmax has one more logit, no value
            self.W_sinks = nn.Parameter(torch.zeros(h, dtype=cfg.dtype))

        self.hook_q = HookPoint()  # [batch, pos, n_heads, d_head]
        self.hook_k = HookPoint()  # [batch, pos, n_key_value_heads, d_head]
        self.hook_v = HookPoint()  # [batch, pos, n_key_value_heads, d_head]
        self.rotary = None
        if cfg.positional_embedding_type == "rotary":
            self.rotary = RotaryEmbedding.from_config(cfg, layer_index, is_local)
            self.hook_rot_q = HookPoint()  # [batch, pos, n_heads, d_head]
            self.hook_rot_k = HookPoint()  # [batch, pos, n_key_value_heads, d_head]
        # ALiBi (BLOOM): each head's scores gain slope * key position (Hugging Face's form; by
        # softmax's shift invariance the same pattern as slope * -(query - key)).
        self.alibi_slopes = None
        if cfg.positional_embedding_type == "alibi":
            self.alibi_slopes = alibi_slopes(h)
        self.hook_attn_scores = HookPoint()  # [batch, n_heads, query_pos, key_pos]
        self.hook_pattern = HookPoint()  # [batch, n_heads, query_pos, key_pos]
        self.hook_z = HookPoint()  # [batch, pos, n_heads, d_head]
        # hook_result [batch, pos, n_heads, d_model] exists when cfg.use_attn_result is on.

    def __getattr__(self, name: str) -> Tensor:
        if name in _GROUPED and f"_{name}" in self._parameters:
            repeats = self.cfg.n_heads // self.n_key_value_heads
            return self._parameters[f"_{name}"].repeat_interleave(repeats, dim=0)
        return super().__getattr__(name)

    # TransformerLens's buffers (mask, IGNORE, rotary_sin/cos) in state dicts: see tl_buffers.
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        save_tl_buffers(self, destination, prefix)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any) -> None:
        check_tl_buffers(self, state_dict, prefix)
        pop_tl_buffers(state_dict, prefix)  # the loader's own copy of the state dict
        super()._load_from_state_dict(state_dict, prefix, *args)

    def key_value_weights(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``W_K``, ``b_K``, ``W_V``, ``b_V`` per key/value head (not expanded)."""
        prefix = "_" if self.grouped else ""
        return tuple(getattr(self, f"{prefix}{name}") for name in ("W_K", "b_K", "W_V", "b_V"))

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
        if bias_is_skippable(bias, rows=batch * pos):
            per_head = torch.bmm(flat_x, weight)  # [n_heads, batch*pos, d_head]
        else:
            per_head = torch.baddbmm(bias[:, None, :], flat_x, weight)
        return per_head.view(h, batch, pos, d).permute(1, 2, 0, 3)  # a view, no copy

    def forward(
        self,
        query_input: Tensor,
        key_input: Tensor,
        value_input: Tensor,
        past_kv_cache_entry: KeyValueCacheEntry | None = None,
        additive_attention_mask: Float[Tensor, "batch 1 1 key_pos"] | None = None,
        attention_mask: Int[Tensor, "batch key_pos"] | None = None,
        position_bias: None = None,
        *,
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None = None,
        allowed_keys: Bool[Tensor, "batch_or_1 1 query_pos key_pos"] | None = None,
        query_positions: Int[Tensor, "batch_or_1 query_pos"] | None = None,
        key_positions: Int[Tensor, "batch_or_1 pos"] | None = None,
    ) -> Float[Tensor, "batch query_pos d_model"]:
        """Queries from ``query_input``, keys and values from ``past_kv_cache_entry`` then
        ``key_input`` and ``value_input``; the positional arguments are TransformerLens's.

        By default the queries are the last positions and attend causally (within the
        window on a local layer, and not to padding keys); a bidirectional model
        (``attention_dir="bidirectional"``) attends to every key, padding included, as
        TransformerLens's does. ``attention_mask`` (1 = token, 0 = padding, over cached plus
        new positions) marks the padding and, for rotary models, sets each token's position
        (left padding shifts a text to start at 0); ``additive_attention_mask`` is added to
        the scores after that (e.g. -inf on padding keys of a bidirectional model).
        ``position_bias`` is TransformerLens's T5 relative bias, which no model here has.

        interp's own keyword arguments: ``key_padding_mask`` is ``attention_mask`` as a bool
        (what the model passes, computed once a forward); ``allowed_keys`` replaces the
        whole masking rule: True where a query may attend to a key (each query must be
        allowed at least one key). Rotary models rotate queries and keys by their absolute
        positions (the cache holds keys already rotated); ``key_positions`` defaults to the
        positions after the cached ones, ``query_positions`` to ``key_positions`` (give it
        when there are fewer queries).
        """
        if position_bias is not None:
            raise ValueError(
                "position_bias is T5's relative attention bias, which interp's models do not "
                "have; add a bias to the scores with additive_attention_mask or a hook on "
                "hook_attn_scores instead."
            )
        past_len = past_kv_cache_entry.length if past_kv_cache_entry is not None else 0
        if attention_mask is not None:
            key_padding_mask, key_positions = self.read_attention_mask(
                attention_mask, past_len, key_input.shape[1], key_padding_mask, key_positions
            )
        if self.bidirectional:  # as TransformerLens: padding only shifts the positions
            key_padding_mask = None
        W_K, b_K, W_V, b_V = self.key_value_weights()
        q = self.hook_q(self.project(query_input, self.W_Q, self.b_Q))
        k = self.hook_k(self.project(key_input, W_K, b_K))
        v = self.hook_v(self.project(value_input, W_V, b_V))
        if self.cfg.use_qk_norm and self.cfg.qk_norm_across_heads:  # over n_heads * d_head
            q = self.q_norm(q.flatten(-2)).unflatten(-1, q.shape[-2:])
            k = self.k_norm(k.flatten(-2)).unflatten(-1, k.shape[-2:])
        elif self.cfg.use_qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        alibi = None
        if self.alibi_slopes is not None:  # slope * each key's position, cached keys' too
            _, key_positions = self.positions(
                q.shape[1], k.shape[1], past_len, query_positions, key_positions, q.device
            )
            alibi = self.alibi_bias(
                self.all_key_positions(past_len, key_positions, key_padding_mask)
            )
        if self.rotary is not None:
            query_positions, key_positions = self.positions(
                q.shape[1], k.shape[1], past_len, query_positions, key_positions, q.device
            )
            q = self.hook_rot_q(self.rotary(q, query_positions))
            k = self.hook_rot_k(self.rotary(k, key_positions))
        if past_kv_cache_entry is not None:
            k, v = past_kv_cache_entry.extend(k, v)

        # GPT-Neo's half-precision scores are float32 (cfg.attn_scores_float32), and ALiBi
        # biases the scores: the explicit path computes them.
        upcast = self.cfg.attn_scores_float32 and q.dtype in (torch.float16, torch.bfloat16)
        explicit_only = upcast or self.alibi_slopes is not None or self.cfg.use_attn_sinks
        if self.uses_fused_path() and additive_attention_mask is None and not explicit_only:
            z = self.fast_attention(q, k, v, key_padding_mask, allowed_keys)
        else:
            mask = allowed_keys
            if mask is None:
                mask = self.attention_mask(q.shape[1], k.shape[1], key_padding_mask, q.device)
            padded = key_padding_mask is not None or additive_attention_mask is not None
            z = self.explicit_attention(q, k, v, mask, padded, additive_attention_mask, alibi)
        del q, k, v  # freed before the output projection allocates its own
        z = self.hook_z(z)  # [batch, query_pos, n_heads, d_head]
        return self.output(z)

    def output(
        self, z: Float[Tensor, "batch query_pos n_heads d_head"]
    ) -> Float[Tensor, "batch query_pos d_model"]:
        """The heads' outputs summed into the residual stream, ``z @ W_O + b_O``, through
        ``hook_result`` (each head's share) when ``cfg.use_attn_result`` is on."""
        if self.cfg.use_attn_result:
            result = self.hook_result(torch.einsum("bqhd,hdm->bqhm", z, self.W_O))
            return result.sum(dim=2) + self.b_O
        h, d, m = self.W_O.shape
        return affine(z.reshape(*z.shape[:2], h * d), self.W_O.reshape(h * d, m), self.b_O)

    def alibi_bias(
        self, key_positions: Int[Tensor, "batch_or_1 key_pos"]
    ) -> Float[Tensor, "batch_or_1 n_heads 1 key_pos"]:
        """ALiBi's bias, ``slope * key position`` in float32, as Hugging Face's BLOOM adds it
        (the same pattern as ``slope * -(query - key)``: the softmax ignores what is the
        same for every key of a query)."""
        slopes = self.alibi_slopes.to(key_positions.device)
        return slopes[None, :, None, None] * key_positions[:, None, None, :].float()

    @staticmethod
    def all_key_positions(
        past_len: int,
        key_positions: Int[Tensor, "batch_or_1 pos"],
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None,
    ) -> Int[Tensor, "batch_or_1 key_pos"]:
        """The positions of the cached keys (counted from each row's first token when there
        is padding) followed by the new keys' ``key_positions``."""
        if past_len == 0:
            return key_positions
        if key_padding_mask is not None:
            cached = get_offset_position_ids(0, key_padding_mask[:, :past_len].long())
        else:
            cached = torch.arange(past_len, device=key_positions.device)[None]
        batch = max(cached.shape[0], key_positions.shape[0])
        return torch.cat([cached.expand(batch, -1), key_positions.expand(batch, -1)], dim=1)

    @staticmethod
    def read_attention_mask(
        attention_mask: Int[Tensor, "batch key_pos"],
        past_len: int,
        n_new: int,
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None,
        key_positions: Int[Tensor, "batch_or_1 pos"] | None,
    ) -> tuple[Bool[Tensor, "batch key_pos"] | None, Int[Tensor, "batch pos"] | None]:
        """TransformerLens's ``attention_mask`` (1 = token, 0 = padding, over the ``past_len``
        cached and ``n_new`` new positions) as the padding mask (None when nothing is padded)
        and the new keys' positions, unless they were given."""
        if attention_mask.ndim != 2 or attention_mask.shape[1] != past_len + n_new:
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)}; expected [batch, "
                f"{past_len + n_new}]: one column for each of the {past_len} cached and "
                f"{n_new} new positions."
            )
        if key_padding_mask is None and not attention_mask.all():
            key_padding_mask = attention_mask.bool()
        if key_positions is None:
            key_positions = get_offset_position_ids(past_len, attention_mask)
        return key_padding_mask, key_positions

    def uses_fused_path(self) -> bool:
        """Whether the next forward runs ``scaled_dot_product_attention``: nothing reads or
        edits the scores or the pattern, and the scores are not soft-capped."""
        return (
            self.cfg.use_fast_attention
            and self.cfg.attn_scores_soft_cap <= 0
            and not (self.hook_attn_scores.has_hooks or self.hook_pattern.has_hooks)
        )

    @staticmethod
    def positions(
        query_len: int,
        key_len: int,
        past_len: int,
        query_positions: Int[Tensor, "batch_or_1 query_pos"] | None,
        key_positions: Int[Tensor, "batch_or_1 pos"] | None,
        device: torch.device,
    ) -> tuple[Int[Tensor, "batch_or_1 query_pos"], Int[Tensor, "batch_or_1 pos"]]:
        """The rotary positions of the queries and the new keys, defaults filled in."""
        if key_positions is None:
            key_positions = torch.arange(past_len, past_len + key_len, device=device)[None]
        if query_positions is None:
            if query_len != key_len:
                raise ValueError(
                    f"{query_len} queries for {key_len} keys: pass query_positions (the "
                    "absolute position of each query) to rotate them."
                )
            query_positions = key_positions
        return query_positions, key_positions

    def attention_mask(
        self,
        query_len: int,
        key_len: int,
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None,
        device: torch.device,
    ) -> Bool[Tensor, "batch_or_1 1 query_pos key_pos"]:
        """True where a query may attend to a key: causal, within the window on a local
        layer (``0 <= query - key < window_size``), and the key is not padding; every key
        for a bidirectional model.

        Queries are the last ``query_len`` of ``key_len`` positions (earlier ones are cached).
        """
        if self.bidirectional:  # padding keys too, as in TransformerLens
            return torch.ones(1, 1, query_len, key_len, dtype=torch.bool, device=device)
        query_pos = torch.arange(key_len - query_len, key_len, device=device)
        key_pos = torch.arange(key_len, device=device)
        distance = query_pos[:, None] - key_pos[None, :]
        allowed = distance >= 0
        if self.window_size is not None:
            allowed = allowed & (distance < self.window_size)
        allowed = allowed[None, None]
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        return allowed

    def explicit_attention(
        self,
        q: Float[Tensor, "batch query_pos n_heads d_head"],
        k: Float[Tensor, "batch key_pos n_key_value_heads d_head"],
        v: Float[Tensor, "batch key_pos n_key_value_heads d_head"],
        mask: Bool[Tensor, "batch_or_1 1 query_pos key_pos"],
        padded: bool,
        additive_mask: Float[Tensor, "batch 1 1 key_pos"] | None = None,
        alibi: Float[Tensor, "batch_or_1 n_heads 1 key_pos"] | None = None,
    ) -> Float[Tensor, "batch query_pos n_heads d_head"]:
        """Scores (divided by ``attn_scale``, soft-capped, masked, plus ``additive_mask``)
        and pattern as tensors that hooks can read and overwrite; the softmax runs in
        float32 (and the scores too with ``cfg.attn_scores_float32``).

        The matmuls run head-major, [n_heads, batch, ...], the layout ``project`` produces, so
        they read q, k and v without copies; hooks see [batch, n_heads, ...] views of it.
        """
        if self.grouped:  # each key/value head serves n_heads / n_key_value_heads queries
            repeats = self.cfg.n_heads // self.n_key_value_heads
            k, v = k.repeat_interleave(repeats, dim=2), v.repeat_interleave(repeats, dim=2)
        if self.cfg.attn_scores_float32:  # half-precision q and k scored in float32 (GPT-Neo)
            q, k = q.to(_at_least_float32(q.dtype)), k.to(_at_least_float32(k.dtype))
        scores = torch.matmul(q.permute(2, 0, 1, 3), k.permute(2, 0, 3, 1)).transpose(0, 1)
        scores = scores.div_(self.cfg.attn_scale)
        if alibi is not None:  # rounded once to v's dtype, as BLOOM's baddbmm
            scores = (scores + alibi).to(v.dtype)
        cap = self.cfg.attn_scores_soft_cap
        if cap > 0:
            scores = torch.tanh(scores / cap) * cap
        scores = scores.masked_fill_(~mask, float("-inf"))
        if additive_mask is not None:
            scores = scores + additive_mask
        scores = self.hook_attn_scores(scores)
        if self.cfg.use_attn_sinks:
            pattern = self.pattern_with_sinks(scores)
        else:
            # Softmax copies a non-contiguous input, so it runs on the head-major layout too.
            softmax_dtype = _at_least_float32(scores.dtype)  # float64 models keep float64
            pattern = scores.transpose(0, 1).softmax(dim=-1, dtype=softmax_dtype).transpose(0, 1)
        if padded:  # a padding query that sees only padding keys attends to nothing
            pattern = pattern.nan_to_num(0.0)
        pattern = self.hook_pattern(pattern.to(v.dtype))  # [batch, n_heads, query_pos, key_pos]
        z = torch.matmul(pattern.transpose(0, 1), v.permute(2, 0, 1, 3))  # [h, b, q, d_head]
        return z.permute(1, 2, 0, 3)

    def pattern_with_sinks(
        self, scores: Float[Tensor, "batch n_heads query_pos key_pos"]
    ) -> Float[Tensor, "batch n_heads query_pos key_pos"]:
        """The pattern over the real keys when each head's ``W_sinks`` logit joins the
        softmax as one more key (gpt-oss), computed as Hugging Face's eager attention: the
        row maximum subtracted, the softmax in the scores' dtype, the sink's column dropped
        (so each row sums to less than 1)."""
        batch, n_heads, query_len, _ = scores.shape
        sinks = self.W_sinks.to(scores.dtype)[None, :, None, None]
        combined = torch.cat([scores, sinks.expand(batch, n_heads, query_len, 1)], dim=-1)
        combined = combined.sub_(combined.amax(dim=-1, keepdim=True))  # a fresh tensor
        return combined.softmax(dim=-1, dtype=combined.dtype)[..., :-1]

    def fast_attention(
        self,
        q: Float[Tensor, "batch query_pos n_heads d_head"],
        k: Float[Tensor, "batch key_pos n_key_value_heads d_head"],
        v: Float[Tensor, "batch key_pos n_key_value_heads d_head"],
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None,
        allowed_keys: Bool[Tensor, "batch_or_1 1 query_pos key_pos"] | None = None,
    ) -> Float[Tensor, "batch query_pos n_heads d_head"]:
        """The same result through ``scaled_dot_product_attention`` (grouped keys and values
        are not expanded); a mask tensor is built only when the causal flag cannot express
        it (padding, some keys already cached, or a window shorter than the keys); a
        bidirectional model needs none."""
        query_len, key_len = q.shape[1], k.shape[1]
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [batch, heads, pos, d_head]
        options = dict(scale=1 / self.cfg.attn_scale, enable_gqa=self.grouped)
        window_bites = self.window_size is not None and key_len > self.window_size
        causal_only = allowed_keys is None and key_padding_mask is None and not window_bites
        if causal_only and query_len == key_len and not self.bidirectional:
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True, **options)
        elif causal_only and (query_len == 1 or self.bidirectional):  # every key is seen
            z = F.scaled_dot_product_attention(q, k, v, **options)
        else:
            mask = allowed_keys
            if mask is None:
                mask = self.attention_mask(query_len, key_len, key_padding_mask, q.device)
            z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **options)
            if key_padding_mask is not None:  # a query that sees only padding attends to nothing
                z = z.nan_to_num(0.0)
        return z.transpose(1, 2)


def alibi_slopes(n_heads: int) -> Float[Tensor, " n_heads"]:
    """ALiBi's slope per head, as Hugging Face's ``build_alibi_tensor``: the geometric series
    ``2 ** (-8 i / n)`` for the largest power of two ``n <= n_heads``, then every other term
    of the series for ``2 n`` for the remaining heads (a head count that is not a power of 2).

    Example:
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
    """
    # On the CPU even inside ``torch.device("meta")``, as the rotary frequencies (not weights).
    cpu = dict(dtype=torch.float32, device="cpu")
    closest = 2 ** math.floor(math.log2(n_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), **cpu)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32, device="cpu"))
    if closest != n_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), **cpu)
        remaining = min(closest, n_heads - closest)
        odd = torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32, device="cpu")
        slopes = torch.cat([slopes, torch.pow(extra_base, odd)])
    return slopes
