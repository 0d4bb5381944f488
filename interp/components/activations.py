"""Activation functions by their config names, and the fused ``x @ W + b`` every layer uses."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor


def affine(
    x: Float[Tensor, "... d_in"], weight: Float[Tensor, "d_in d_out"], bias: Float[Tensor, " d_out"]
) -> Float[Tensor, "... d_out"]:
    """``x @ weight + bias`` as one fused matrix multiply-add."""
    flat = torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight)
    return flat.view(*x.shape[:-1], weight.shape[-1])


def gelu_fast(x: Tensor) -> Tensor:
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation: GPT-2's "gelu_new", Gemma's "gelu_pytorch_tanh"."""
    return F.gelu(x, approximate="tanh")


ACTIVATIONS = {
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "gelu": F.gelu,  # exact (erf), GPT-NeoX's
    "relu": F.relu,
    "gelu_fast": gelu_fast,
    "silu": F.silu,
}
