"""One transformer block: the residual stream through attention then the MLP (or both at
once, for parallel blocks), each optionally between two norms."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from interp.components.attention import Attention
from interp.components.mlp import MLP
from interp.components.moe import MoE
from interp.components.moe_gpt_oss import GptOssMoE
from interp.components.norms import make_norm
from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint

if TYPE_CHECKING:  # a type only: the KV cache lives in interp.cache, which imports these
    from interp.cache.kv_cache import KeyValueCacheEntry

# Opt-in hook points: config flag -> (the module that holds them, their names).
# hook_attn_in and hook_q_input are [batch, pos, n_heads, d_model]; hook_k_input and
# hook_v_input are [batch, pos, n_key_value_heads, d_model]; hook_mlp_in is
# [batch, pos, d_model]; hook_result is [batch, pos, n_heads, d_model].
OPT_IN_HOOKS = {
    "use_attn_result": ("attn", ("hook_result",)),
    "use_attn_in": ("block", ("hook_attn_in",)),
    "use_split_qkv_input": ("block", ("hook_q_input", "hook_k_input", "hook_v_input")),
    "use_hook_mlp_in": ("block", ("hook_mlp_in",)),
}


class TransformerBlock(nn.Module):
    """resid_pre -> (+ attention) resid_mid -> (+ MLP) resid_post, as TransformerLens's block.

    The config composes it: ``ln1``/``ln2`` are the norms ``normalization_type`` names;
    ``use_normalization_before_and_after`` adds ``ln1_post``/``ln2_post`` on the attention
    and MLP outputs (``hook_attn_out``/``hook_mlp_out`` see them after that norm), and
    ``use_post_norms_only`` keeps those two alone (OLMo 2: ``ln1``/``ln2`` are identities);
    ``parallel_attn_mlp`` feeds ``resid_pre`` to both attention and MLP (there is then no
    ``hook_resid_mid``); attention-only blocks have no MLP, and ``cfg.num_experts`` makes it
    a mixture of experts (``MoE``); shortformer models add their position embeddings to the
    attention's query and key inputs. ``block_index`` picks the
    layer's attention type in ``cfg.attn_types``.

    Example:
        >>> block = TransformerBlock(model.cfg, block_index=0)   # weights empty until loaded
        >>> _ = block.load_state_dict(model.blocks[0].state_dict())
        >>> resid_pre = cache["resid_pre", 0]
        >>> block(resid_pre).shape   # [batch, pos, d_model]
        torch.Size([1, 21, 128])
        >>> torch.allclose(block(resid_pre), cache["resid_post", 0], atol=1e-5)
        True
    """

    def __init__(self, cfg: HookedTransformerConfig | dict, block_index: int = 0) -> None:
        super().__init__()
        cfg = HookedTransformerConfig.unwrap(cfg)
        self.cfg = cfg
        self.block_index = block_index
        # OLMo 2 (use_post_norms_only): the post-norms alone; ln1 and ln2 are identities.
        sandwich = cfg.use_normalization_before_and_after or cfg.use_post_norms_only
        self.ln1 = nn.Identity() if cfg.use_post_norms_only else make_norm(cfg)
        self.attn = Attention(cfg, layer_id=block_index)
        if sandwich:
            self.ln1_post = make_norm(cfg, weighted=True)
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.hook_attn_out = HookPoint()  # [batch, pos, d_model]
        if not cfg.attn_only:
            self.ln2 = nn.Identity() if cfg.use_post_norms_only else make_norm(cfg)
            if cfg.experts_swiglu_limit is not None:
                self.mlp = GptOssMoE(cfg)
            else:
                self.mlp = MoE(cfg) if cfg.num_experts else MLP(cfg)
            if sandwich:
                self.ln2_post = make_norm(cfg, weighted=True)
            if not cfg.parallel_attn_mlp:
                self.hook_resid_mid = HookPoint()  # [batch, pos, d_model]
            self.hook_mlp_out = HookPoint()  # [batch, pos, d_model]
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]
        self.sync_opt_in_hooks()

    def sync_opt_in_hooks(self) -> None:
        """Create the opt-in hook points whose config flag is on and drop the others."""
        n_kv_heads = self.cfg.n_key_value_heads or self.cfg.n_heads
        if self.cfg.use_attn_in and n_kv_heads != self.cfg.n_heads:
            raise ValueError(
                f"use_attn_in=True feeds one input per query head to q, k and v, but this model "
                f"has n_key_value_heads={n_kv_heads} < n_heads={self.cfg.n_heads}; use "
                "use_split_qkv_input=True (hook_k_input/hook_v_input have one input per "
                "key/value head) instead."
            )
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
        shortformer_pos_embed: Float[Tensor, "batch_or_1 pos d_model"] | None = None,
        past_kv_cache_entry: KeyValueCacheEntry | None = None,
        attention_mask: Int[Tensor, "batch key_pos"] | None = None,
        *,
        key_padding_mask: Bool[Tensor, "batch key_pos"] | None = None,
        allowed_keys: Bool[Tensor, "batch_or_1 1 pos key_pos"] | None = None,
        output_positions: Int[Tensor, " n_out"] | None = None,
        positions: Int[Tensor, "batch_or_1 pos"] | None = None,
    ) -> Float[Tensor, "batch pos_or_n_out d_model"]:
        """The block on ``resid_pre``, attending to ``past_kv_cache_entry`` then to these
        positions; the positional arguments are TransformerLens's.

        ``shortformer_pos_embed`` (shortformer models) is added to the normalised query and
        key inputs, not to the values or the residual stream. ``attention_mask`` (1 = token,
        0 = padding, over cached plus new positions) marks padding keys and sets rotary
        positions, as in TransformerLens.

        interp's own keyword arguments: ``key_padding_mask`` is ``attention_mask`` as a bool
        (what the model passes, computed once a forward); ``allowed_keys`` replaces the
        causal (and padding) rule of which keys each position may attend to (see
        ``Attention.forward``). With ``output_positions``, only those positions are computed
        past the keys and values (queries, attention output, MLP), and the result is
        [batch, n_out, d_model]; the other positions only supply keys and values.
        ``hook_q`` and every hook after the attention then see the output positions only.
        ``positions`` are the absolute positions of these tokens, for rotary embeddings
        (default: ``past_kv_cache_entry.length`` onwards, the same for every row).
        """
        past_len = past_kv_cache_entry.length if past_kv_cache_entry is not None else 0
        if attention_mask is not None:
            key_padding_mask, positions = self.attn.read_attention_mask(
                attention_mask, past_len, resid_pre.shape[1], key_padding_mask, positions
            )
        resid_pre = self.hook_resid_pre(resid_pre)
        query_input, key_input, value_input = self.attention_inputs(
            resid_pre, shortformer_pos_embed
        )
        if positions is None:
            n_pos = resid_pre.shape[1]
            positions = torch.arange(past_len, past_len + n_pos, device=resid_pre.device)[None]
        query_positions = positions
        if output_positions is not None:
            if allowed_keys is None:
                n_pos = resid_pre.shape[1]
                allowed_keys = self.attn.attention_mask(
                    n_pos, past_len + n_pos, key_padding_mask, resid_pre.device
                )
            allowed_keys = allowed_keys[:, :, output_positions]
            query_input = query_input[:, output_positions]
            resid_pre = resid_pre[:, output_positions]
            query_positions = positions[:, output_positions]
        attn_out = self.attn(
            query_input,
            key_input,
            value_input,
            past_kv_cache_entry,
            key_padding_mask=key_padding_mask,
            allowed_keys=allowed_keys,
            query_positions=query_positions,
            key_positions=positions,
        )
        del query_input, key_input, value_input  # freed before the MLP allocates its own
        if self.cfg.use_normalization_before_and_after or self.cfg.use_post_norms_only:
            attn_out = self.ln1_post(attn_out)
        attn_out = self.hook_attn_out(attn_out)
        if self.cfg.attn_only:
            return self.hook_resid_post(resid_pre + attn_out)

        if self.cfg.parallel_attn_mlp:  # the MLP reads resid_pre too; no resid_mid
            mlp_out = self.mlp_output(resid_pre)
            # Summed as Hugging Face's GPT-NeoX sums them, so half precision rounds alike.
            return self.hook_resid_post(resid_pre + (attn_out + mlp_out))
        resid_mid = self.hook_resid_mid(resid_pre + attn_out)
        return self.hook_resid_post(resid_mid + self.mlp_output(resid_mid))

    def attention_inputs(
        self,
        resid_pre: Float[Tensor, "batch pos d_model"],
        shortformer_pos_embed: Float[Tensor, "batch_or_1 pos d_model"] | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The normalised query, key and value inputs: one [batch, pos, d_model] tensor
        shared by all three, or per-head copies when ``use_attn_in`` or
        ``use_split_qkv_input`` hooks them ([batch, pos, n_heads or n_kv_heads, d_model]).
        A shortformer model's position embeddings are added to the query and key inputs."""
        cfg = self.cfg
        if not (cfg.use_attn_in or cfg.use_split_qkv_input):
            normalized = self.ln1(resid_pre)  # one input shared by q, k and v: normalise once
            if shortformer_pos_embed is None:
                return normalized, normalized, normalized
            query_key = normalized + shortformer_pos_embed
            return query_key, query_key, normalized
        n_kv_heads = cfg.n_key_value_heads or cfg.n_heads
        attn_in = resid_pre[:, :, None, :].expand(-1, -1, cfg.n_heads, -1)
        if cfg.use_attn_in:
            attn_in = self.hook_attn_in(attn_in.clone())
        if not cfg.use_split_qkv_input:
            normalized = self.ln1(attn_in)
            query_input = key_input = value_input = normalized
        else:
            # use_attn_in needs n_kv_heads == n_heads (sync_opt_in_hooks): k and v read attn_in.
            kv_in = (
                attn_in if cfg.use_attn_in else resid_pre[:, :, None].expand(-1, -1, n_kv_heads, -1)
            )
            query_input = self.ln1(self.hook_q_input(attn_in.clone()))
            key_input = self.ln1(self.hook_k_input(kv_in.clone()))
            value_input = self.ln1(self.hook_v_input(kv_in.clone()))
        if shortformer_pos_embed is not None:  # the same for every head
            per_head = shortformer_pos_embed[:, :, None, :]
            query_input, key_input = query_input + per_head, key_input + per_head
        return query_input, key_input, value_input

    def mlp_output(
        self, mlp_in: Float[Tensor, "batch pos d_model"]
    ) -> Float[Tensor, "batch pos d_model"]:
        """``hook_mlp_out``: the MLP on ``ln2`` of its input (``hook_mlp_in``), then
        ``ln2_post`` when the block has sandwich norms."""
        if self.cfg.use_hook_mlp_in:
            mlp_in = self.hook_mlp_in(mlp_in.clone())
        mlp_out = self.mlp(self.ln2(mlp_in))
        if self.cfg.use_normalization_before_and_after or self.cfg.use_post_norms_only:
            mlp_out = self.ln2_post(mlp_out)
        return self.hook_mlp_out(mlp_out)
