"""The feed-forward layer: ``act(x @ W_in + b_in) @ W_out + b_out``, or gated (SwiGLU, GeGLU)."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.components.activations import ACTIVATIONS, affine
from interp.components.norms import LayerNorm, LayerNormPre
from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint
from interp.utils.activations import XIELU


class MLP(nn.Module):
    """``act(x @ W_in + b_in) @ W_out + b_out``; ``hook_pre`` before the activation,
    ``hook_post`` after it.

    With ``cfg.gated_mlp`` (Llama's SwiGLU, Gemma's GeGLU) it is TransformerLens's
    ``GatedMLP``: ``(act(x @ W_gate) * (x @ W_in) + b_in) @ W_out + b_out``, with
    ``hook_pre`` the gate's pre-activation ``x @ W_gate``, ``hook_pre_linear`` the up
    projection ``x @ W_in`` and ``hook_post`` ``act(gate) * up + b_in`` (checkpoints of
    these families have no MLP biases: ``b_in`` and ``b_out`` are zeros).

    With ``act_fn="solu_ln"`` (SoLU, ``x * softmax(x)``) a layer norm ``ln`` over d_mlp follows
    the activation, as TransformerLens's: ``hook_mid`` is the SoLU output and ``hook_post``
    its normalised value; ``ln`` has weights ``ln.w``/``ln.b`` when ``normalization_type`` is
    "LN" and none otherwise (``LayerNormPre``).

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=8, d_head=4, d_mlp=32,
        ...                               act_fn="silu", gated_mlp=True)   # == LlamaMLP's
        >>> mlp = MLP(cfg)   # weights empty until a model initialises or loads them
        >>> mlp(torch.randn(2, 5, 16)).shape     # [batch, pos, d_model]
        torch.Size([2, 5, 16])
    """

    def __init__(self, cfg: HookedTransformerConfig | dict) -> None:
        super().__init__()
        cfg = HookedTransformerConfig.unwrap(cfg)
        self.gated = cfg.gated_mlp
        if self.gated:
            self.W_gate = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp, dtype=cfg.dtype))
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp, dtype=cfg.dtype))
        self.b_in = nn.Parameter(torch.zeros(cfg.d_mlp, dtype=cfg.dtype))
        self.W_out = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model, dtype=cfg.dtype))
        self.b_out = nn.Parameter(torch.zeros(cfg.d_model, dtype=cfg.dtype))
        # xIELU's trainable parameters are the MLP's (act_fn.alpha_p, ...), as TransformerLens's.
        self.act_fn = XIELU().to(cfg.dtype) if cfg.act_fn == "xielu" else ACTIVATIONS[cfg.act_fn]
        self.hook_pre = HookPoint()  # [batch, pos, d_mlp]
        if self.gated:
            self.hook_pre_linear = HookPoint()  # [batch, pos, d_mlp]
        self.ln = None
        if cfg.is_layer_norm_activation():
            self.hook_mid = HookPoint()  # [batch, pos, d_mlp]
            weighted = cfg.normalization_type == "LN"
            self.ln = LayerNorm(cfg, cfg.d_mlp) if weighted else LayerNormPre(cfg, cfg.d_mlp)
        self.hook_post = HookPoint()  # [batch, pos, d_mlp]

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        if self.gated:
            gate = self.hook_pre(torch.matmul(x, self.W_gate))
            activated = self.act_fn(gate)
            del gate  # freed before the up projection exists, unless a hook kept it
            up = self.hook_pre_linear(torch.matmul(x, self.W_in))
            post = self.hook_post(torch.addcmul(self.b_in, activated, up))
        elif self.ln is not None:
            pre = self.hook_pre(affine(x, self.W_in, self.b_in))
            post = self.hook_post(self.ln(self.hook_mid(self.act_fn(pre))))
        else:
            pre = self.hook_pre(affine(x, self.W_in, self.b_in))
            post = self.hook_post(self.act_fn(pre))
        return self.output(post)

    def output(self, post: Float[Tensor, "batch pos d_mlp"]) -> Float[Tensor, "batch pos d_model"]:
        """The neurons' outputs written to the residual stream: ``post @ W_out + b_out``."""
        return affine(post, self.W_out, self.b_out)
