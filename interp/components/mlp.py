"""The feed-forward layer: ``act(x @ W_in + b_in) @ W_out + b_out``."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.components.activations import ACTIVATIONS, affine
from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint


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
