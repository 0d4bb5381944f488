"""gpt-oss's experts kept in MXFP4 (``cfg.experts_mxfp4``): each expert stores its three
weights as uint8 blocks and scales (``interp.components.mxfp4``'s layout, one expert's rows)
and dequantizes them in its forward, so the model holds about 0.27x the bytes of bf16
experts, and a forward holds one expert's dequantized weights at a time.

The numbers are those of the experts dequantized at load: dequantization is elementwise,
and the forward is ``GptOssExpert.forward`` itself, on the same dequantized values. The
hooks are ``GptOssExpert``'s. ``W_gate``, ``W_in`` and ``W_out`` read as the dequantized
weights (a new tensor each time, not a parameter: writing to it changes nothing, and the
experts' weights get no gradient); the biases stay parameters.

Blocks of each expert, as gpt-oss's ``gate_up_proj_blocks`` [experts, 2 d_mlp, d_model / 32,
16] and ``down_proj_blocks`` [experts, d_model, d_mlp / 32, 16] hold them: ``W_gate`` is the
even rows of ``gate_up_proj``, ``W_in`` the odd rows, ``W_out`` ``down_proj``'s.

Example:
    >>> from interp.config import HookedTransformerConfig
    >>> cfg = HookedTransformerConfig(n_layers=1, d_model=32, n_ctx=8, d_head=8, d_mlp=32,
    ...     act_fn="silu", gated_mlp=True, num_experts=2, experts_per_token=1,
    ...     experts_swiglu_limit=7.0, experts_mxfp4=True)
    >>> expert = MXFP4GptOssExpert(cfg, cfg.d_mlp)
    >>> expert.W_gate_blocks.shape, expert.W_gate_blocks.dtype   # [d_mlp, d_model / 32, 16]
    (torch.Size([32, 1, 16]), torch.uint8)
    >>> expert.W_gate.shape   # dequantized on reading: [d_model, d_mlp]
    torch.Size([32, 32])
    >>> expert(torch.randn(5, 32)).shape
    torch.Size([5, 32])
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn

from interp.components.activations import ACTIVATIONS
from interp.components.moe_gpt_oss import GptOssExpert
from interp.components.mxfp4 import SCALE_BIAS, VALUES_PER_BLOCK, dequantize_rows
from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint

# The largest FP4 magnitude: a random block's values reach it times 2 ** (scale - 127).
_FP4_MAX = 6.0
# Each weight: (rows, columns) of its blocks, as sizes of the config.
_WEIGHTS = ("W_gate", "W_in", "W_out")


class MXFP4GptOssExpert(nn.Module):
    """One gpt-oss expert whose weights stay MXFP4: buffers ``{W}_blocks`` uint8 [rows,
    columns / 32, 16] and ``{W}_scales`` uint8 [rows, columns / 32] for ``W_gate``, ``W_in``
    ([d_mlp, d_model / 32, ...]) and ``W_out`` ([d_model, d_mlp / 32, ...]); biases ``b_gate``,
    ``b_in`` [d_mlp] and ``b_out`` [d_model]. A new model's blocks are random bytes scaled to
    about ``cfg.init_range``; a loaded one's are the checkpoint's."""

    def __init__(self, cfg: HookedTransformerConfig, d_mlp: int) -> None:
        super().__init__()
        shapes = {"W_gate": (d_mlp, cfg.d_model), "W_in": (d_mlp, cfg.d_model)}
        shapes["W_out"] = (cfg.d_model, d_mlp)
        scale = SCALE_BIAS + math.floor(math.log2(cfg.init_range / _FP4_MAX))
        for name, (rows, columns) in shapes.items():
            n_blocks = columns // VALUES_PER_BLOCK
            blocks = torch.randint(0, 256, (rows, n_blocks, VALUES_PER_BLOCK // 2))
            self.register_buffer(f"{name}_blocks", blocks.to(torch.uint8))
            scales = torch.full((rows, n_blocks), max(0, min(255, scale)), dtype=torch.uint8)
            self.register_buffer(f"{name}_scales", scales)
        self.b_gate = nn.Parameter(torch.zeros(d_mlp, dtype=cfg.dtype))
        self.b_in = nn.Parameter(torch.zeros(d_mlp, dtype=cfg.dtype))
        self.b_out = nn.Parameter(torch.zeros(cfg.d_model, dtype=cfg.dtype))
        self.act_fn = ACTIVATIONS[cfg.act_fn]
        self.limit = cfg.experts_swiglu_limit
        self.alpha = cfg.experts_swiglu_alpha
        self.hook_gate = HookPoint()  # [*tokens, d_mlp]
        self.hook_pre = HookPoint()  # [*tokens, d_mlp]
        self.hook_post = HookPoint()  # [*tokens, d_mlp]
        self._no_tokens = False

    def dequantized(self, name: str) -> Float[Tensor, "columns rows"]:
        """Weight ``name`` ("W_gate", "W_in" or "W_out") in the biases' dtype:
        [d_model, d_mlp] for W_gate and W_in, [d_mlp, d_model] for W_out."""
        blocks, scales = getattr(self, f"{name}_blocks"), getattr(self, f"{name}_scales")
        if self._no_tokens:  # no token routed here: only the shape matters, none is read
            columns = blocks.shape[1] * VALUES_PER_BLOCK
            return self.b_out.new_zeros(()).expand(columns, blocks.shape[0])
        return dequantize_rows(blocks, scales, self.b_out.dtype)

    @property
    def W_gate(self) -> Float[Tensor, "d_model d_mlp"]:
        return self.dequantized("W_gate")

    @property
    def W_in(self) -> Float[Tensor, "d_model d_mlp"]:
        return self.dequantized("W_in")

    @property
    def W_out(self) -> Float[Tensor, "d_mlp d_model"]:
        return self.dequantized("W_out")

    def forward(self, x: Float[Tensor, "*tokens d_model"]) -> Float[Tensor, "*tokens d_model"]:
        """``GptOssExpert.forward`` itself: the same operations on the same values as an
        expert dequantized at load. An expert no token chose dequantizes nothing."""
        self._no_tokens = x.numel() == 0
        try:
            return GptOssExpert.forward(self, x)
        finally:
            self._no_tokens = False


def quantized_bytes(module: nn.Module) -> int:
    """The bytes of ``module``'s MXFP4 blocks and scales (every expert kept in MXFP4 in it).

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=64, n_ctx=8, d_head=8, d_mlp=64,
        ...     act_fn="silu", gated_mlp=True, num_experts=2, experts_per_token=1,
        ...     experts_swiglu_limit=7.0, experts_mxfp4=True)
        >>> quantized_bytes(MXFP4GptOssExpert(cfg, 64))   # 3 weights of 64 x 64 values
        6528
    """
    return sum(
        buffer.numel() * buffer.element_size()
        for expert in module.modules()
        if isinstance(expert, MXFP4GptOssExpert)
        for name in _WEIGHTS
        for buffer in (getattr(expert, f"{name}_blocks"), getattr(expert, f"{name}_scales"))
    )
