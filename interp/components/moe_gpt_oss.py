"""gpt-oss's mixture-of-experts MLP: ``MoE`` (``interp.components.moe``) with biases on the
router and the experts, the top-k router logits softmaxed among themselves, and clamped
SwiGLU experts, as Hugging Face's ``GptOssMLP``. Chosen by ``cfg.experts_swiglu_limit``.

Each expert computes ``gate = x @ W_gate + b_gate`` and ``up = x @ W_in + b_in``, then
``(clamp(up, -limit, limit) + 1) * glu`` with ``g = clamp(gate, max=limit)`` and
``glu = g * sigmoid(alpha * g)``, then ``post @ W_out + b_out``. The hooks are ``MoE``'s:
``experts.{e}.hook_gate`` / ``hook_pre`` the gate and up projections before clamping,
``hook_post`` the clamped SwiGLU; ``hook_router_logits`` includes the router bias.

Example:
    >>> from interp.config import HookedTransformerConfig
    >>> cfg = HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=8, d_head=4, d_mlp=32,
    ...     act_fn="silu", gated_mlp=True, num_experts=4, experts_per_token=2,
    ...     experts_swiglu_limit=7.0)   # and experts_swiglu_alpha=1.702, the default
    >>> moe = GptOssMoE(cfg)
    >>> for weight in moe.parameters():   # created empty; a model initialises or loads them
    ...     _ = torch.nn.init.normal_(weight, std=0.1)
    >>> moe(torch.randn(2, 5, 16)).shape           # [batch, pos, d_model]
    torch.Size([2, 5, 16])
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.components.activations import affine
from interp.components.moe import Expert, MoE
from interp.config import HookedTransformerConfig


class GptOssExpert(Expert):
    """One gpt-oss expert: ``Expert``'s weights and hooks, plus the biases ``b_gate``,
    ``b_in`` [d_mlp] and ``b_out`` [d_model], and the clamped SwiGLU (module docstring)."""

    def __init__(self, cfg: HookedTransformerConfig, d_mlp: int) -> None:
        super().__init__(cfg, d_mlp)
        self.b_gate = nn.Parameter(torch.zeros(d_mlp, dtype=cfg.dtype))
        self.b_in = nn.Parameter(torch.zeros(d_mlp, dtype=cfg.dtype))
        self.b_out = nn.Parameter(torch.zeros(cfg.d_model, dtype=cfg.dtype))
        self.limit = cfg.experts_swiglu_limit
        self.alpha = cfg.experts_swiglu_alpha

    def forward(self, x: Float[Tensor, "*tokens d_model"]) -> Float[Tensor, "*tokens d_model"]:
        # Product, then bias, each rounded, as Hugging Face's ``x @ W + b`` (not one addmm).
        gate = self.hook_gate(torch.matmul(x, self.W_gate) + self.b_gate)
        pre = self.hook_pre(torch.matmul(x, self.W_in) + self.b_in)
        # In place on fresh tensors only (never on what a hook may have kept): the same
        # operations in Hugging Face's order, with half the allocations.
        clamped = gate.clamp(max=self.limit)
        glu = torch.sigmoid(clamped * self.alpha).mul_(clamped)
        del clamped
        up = pre.clamp(min=-self.limit, max=self.limit).add_(1)
        post = self.hook_post(up.mul_(glu))
        del glu
        return torch.matmul(post, self.W_out).add_(self.b_out)


class GptOssMoE(MoE):
    """``MoE`` with gpt-oss's router (bias ``b_gate`` [num_experts]; the weights are the
    softmax of the chosen experts' logits, in the logits' dtype) and ``GptOssExpert``s.

    ``hook_expert_weights`` is still the float32 softmax over every expert, from which the
    top ``experts_per_token`` are chosen: the same experts as the top logits.
    """

    def __init__(self, cfg: HookedTransformerConfig | dict) -> None:
        cfg = HookedTransformerConfig.unwrap(cfg)
        super().__init__(cfg)
        self.b_gate = nn.Parameter(torch.zeros(cfg.num_experts, dtype=cfg.dtype))
        expert = GptOssExpert
        if cfg.experts_mxfp4:  # weights kept in MXFP4, dequantized in the forward
            from interp.components.mxfp4_experts import MXFP4GptOssExpert as expert
        self.experts = nn.ModuleList(expert(cfg, cfg.d_mlp) for _ in range(cfg.num_experts))

    def route(
        self, x: Float[Tensor, "batch pos d_model"]
    ) -> tuple[Int[Tensor, "batch pos k"], Float[Tensor, "batch pos k"]]:
        """The chosen experts (the highest logit first) and the softmax of their logits, as
        Hugging Face's ``GptOssTopKRouter``."""
        logits = self.hook_router_logits(affine(x, self.W_gate, self.b_gate))
        probs = self.hook_expert_weights(torch.softmax(logits, dim=-1, dtype=torch.float32))
        indices = self.hook_expert_indices(probs.topk(self.cfg.experts_per_token, dim=-1)[1])
        if self.hook_expert_indices.has_hooks:  # a hook's experts must exist, as MoE checks
            self._check_experts(indices)
        chosen = logits.gather(-1, indices)
        return indices, torch.softmax(chosen, dim=-1, dtype=chosen.dtype)
