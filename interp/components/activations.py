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


ACTIVATIONS = {
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu": F.gelu,
    "relu": F.relu,
    "gelu_fast": gelu_fast,
    "silu": F.silu,
}
