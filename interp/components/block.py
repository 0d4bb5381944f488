"""One transformer block: the residual stream through attention then the MLP."""

from __future__ import annotations

from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from interp.components.attention import Attention
from interp.components.mlp import MLP
from interp.components.norms import LayerNorm
from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint
from interp.kv_cache import KeyValueCacheEntry

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
