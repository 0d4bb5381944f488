"""TransformerLens's activation functions, with its formulas, and its table of them by config
name (``transformer_lens.utils.gelu_new``..., ``ACTIVATION_FN_DICT``, and
``transformer_lens.utilities.activation_functions.SUPPORTED_ACTIVATIONS``).

The model's MLPs use ``interp.components.ACTIVATIONS``: the same functions, through PyTorch's
fused kernels where one exists (``F.gelu(x, approximate="tanh")`` for "gelu_new"), which
round differently in the last bits.

Example:
    >>> interp.utils.gelu_new(torch.tensor([1.0]))
    tensor([0.8412])
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

ActivationFunction = Callable[..., Tensor]


def gelu_new(input: Float[Tensor, "batch pos d_mlp"]) -> Float[Tensor, "batch pos d_mlp"]:
    """GPT-2's GELU, ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``."""
    inner = math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))
    return 0.5 * input * (1.0 + torch.tanh(inner))


def gelu_fast(input: Float[Tensor, "batch pos d_mlp"]) -> Float[Tensor, "batch pos d_mlp"]:
    """GELU's "fast" tanh approximation, ``0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))``."""
    return 0.5 * input * (1.0 + torch.tanh(input * 0.7978845608 * (1.0 + 0.044715 * input * input)))


def gelu_pytorch_tanh(input: Tensor) -> Tensor:
    """PyTorch's tanh approximation of GELU (Gemma's "gelu_pytorch_tanh")."""
    return F.gelu(input, approximate="tanh")


def solu(input: Float[Tensor, "batch pos d_mlp"]) -> Float[Tensor, "batch pos d_mlp"]:
    """SoLU, ``x * softmax(x)`` over the last axis (https://transformer-circuits.pub/2022/solu/);
    the layer norm of "solu_ln" is the MLP's ``ln``."""
    return input * F.softmax(input, dim=-1)


def xielu(input: Float[Tensor, "batch pos d_mlp"]) -> Float[Tensor, "batch pos d_mlp"]:
    """xIELU (https://arxiv.org/abs/2411.13010) with its default, fixed parameters
    (alpha_p = alpha_n = 0.8, beta = 0.5, eps = -1e-6)."""
    alpha_p, alpha_n, beta = 0.8, 0.8, 0.5
    eps = torch.tensor(-1e-6)
    return torch.where(
        input > 0,
        alpha_p * input * input + beta * input,
        (torch.expm1(torch.min(input, eps)) - input) * alpha_n + beta * input,
    )


class XIELU(nn.Module):
    """xIELU with trainable ``alpha_p``/``alpha_n`` (stored through the inverse softplus, as
    Hugging Face's ``XIELUActivation``) and fixed buffers ``beta`` and ``eps``."""

    def __init__(
        self,
        alpha_p_init: float = 0.8,
        alpha_n_init: float = 0.8,
        beta_init: float = 0.5,
        eps: float = -1e-6,
    ) -> None:
        super().__init__()

        def inverse_softplus(value: float) -> Tensor:
            return torch.log(torch.expm1(torch.tensor(value, dtype=torch.float32)))

        self.alpha_p = nn.Parameter(inverse_softplus(alpha_p_init))
        self.alpha_n = nn.Parameter(inverse_softplus(alpha_n_init - beta_init))
        self.register_buffer("beta", torch.tensor(beta_init, dtype=torch.float32))
        self.register_buffer("eps", torch.tensor(eps, dtype=torch.float32))

    def forward(self, input: Float[Tensor, "batch pos d_mlp"]) -> Float[Tensor, "batch pos d_mlp"]:
        alpha_p = F.softplus(self.alpha_p)
        alpha_n = self.beta + F.softplus(self.alpha_n)
        return torch.where(
            input > 0,
            alpha_p * input * input + self.beta * input,
            (torch.expm1(torch.min(input, self.eps)) - input) * alpha_n + self.beta * input,
        )


# TransformerLens's activation functions by config name ("solu_ln" is SoLU; its layer norm
# belongs to the MLP).
SUPPORTED_ACTIVATIONS: dict[str, ActivationFunction] = {
    "solu": solu,
    "solu_ln": solu,
    "gelu_new": gelu_new,
    "gelu_fast": gelu_fast,
    "silu": F.silu,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_pytorch_tanh": gelu_pytorch_tanh,
    "xielu": xielu,
}
ACTIVATION_FN_DICT = dict(SUPPORTED_ACTIVATIONS)  # transformer_lens.utils's copy of the table
