"""Activation functions by their config names, and the fused ``x @ W + b`` every layer uses."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from interp.utils.activations import gelu_fast, solu

# Checking a bias reads it once (a few microseconds); skipping it saves a pass over
# rows x d_out. Below this many rows (a decoding step, a short prompt) the check would cost
# more than it saves, so the bias is simply added.
MIN_ROWS_TO_CHECK_BIAS = 64


def bias_is_skippable(bias: Tensor, rows: int) -> bool:
    """Whether adding ``bias`` to a product of ``rows`` rows can be left out: on the CPU, for
    at least ``MIN_ROWS_TO_CHECK_BIAS`` rows, when it is all zeros and no gradient must reach
    it.

    Checkpoints of the Llama, Mistral, Qwen and Gemma families have no biases (TransformerLens,
    and so interp, keeps zeros in their place), and on the CPU ``addmm`` first copies the bias
    into every row of its output: a whole extra pass over it. On an accelerator the addition is
    fused and free, and checking the values would wait for the device, so it is always kept.
    The values are read on every call, so a bias edited in place is never missed.
    """
    if rows < MIN_ROWS_TO_CHECK_BIAS or bias.device.type != "cpu":
        return False
    if bias.requires_grad and torch.is_grad_enabled():
        return False
    return not bias.any()


def affine(
    x: Float[Tensor, "... d_in"], weight: Float[Tensor, "d_in d_out"], bias: Float[Tensor, " d_out"]
) -> Float[Tensor, "... d_out"]:
    """``x @ weight + bias`` as one fused matrix multiply-add (a plain multiply when the bias
    is all zeros on the CPU and needs no gradient: see ``bias_is_skippable``)."""
    flat_x = x.reshape(-1, x.shape[-1])
    if bias_is_skippable(bias, rows=flat_x.shape[0]):
        flat = flat_x @ weight
    else:
        flat = torch.addmm(bias, flat_x, weight)
    return flat.view(*x.shape[:-1], weight.shape[-1])


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation: GPT-2's "gelu_new", Gemma's "gelu_pytorch_tanh"."""
    return F.gelu(x, approximate="tanh")


def gelu_new_fused(x: Tensor) -> Tensor:
    """GPT-2's "gelu_new" (GELU's tanh approximation): the fused kernel in float32 and
    float64; in half precision Hugging Face's (and TransformerLens's) formula, op by op, so a
    bf16 model rounds as theirs does (GPT-J, GPT-Neo, Phi)."""
    if x.dtype in (torch.float32, torch.float64):
        return F.gelu(x, approximate="tanh")
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
    return 0.5 * x * (1.0 + torch.tanh(inner))


# The model's activations by config name: fused PyTorch kernels where one computes the same
# function (``interp.utils.activations`` has TransformerLens's own formulas).
ACTIVATIONS = {
    "gelu_new": gelu_new_fused,
    "gelu_pytorch_tanh": gelu_tanh,
    "gelu": F.gelu,  # exact (erf), GPT-NeoX's
    "relu": F.relu,
    "gelu_fast": gelu_fast,
    "silu": F.silu,
    "solu": solu,
    "solu_ln": solu,
}
