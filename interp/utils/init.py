"""Weight initialisers with TransformerLens's fan convention.

Our weights are stored ``[d_in, d_out]`` (and attention ``[n_heads, d_model, d_head]``), the
transpose of torch's ``nn.Linear``, so the fans are computed here, not by ``torch.nn.init``.
"""

from __future__ import annotations

import math
from typing import Literal

from torch import Tensor, nn

Nonlinearity = Literal[
    "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu",
]  # fmt: skip


def calc_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight: a bias ``[d]`` is ``(1, d)``, a matrix
    ``[d_in, d_out]`` is ``(d_in, d_out)``, attention ``[n_heads, d_model, d_head]`` is
    ``(d_model, n_heads * d_head)``.

    Example:
        >>> calc_fan_in_and_fan_out(torch.empty(12, 768, 64))
        (768, 768)
    """
    shape = tensor.shape
    if len(shape) == 0:
        raise ValueError("Fan in and fan out cannot be computed for a scalar.")
    if len(shape) == 1:
        return 1, shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    if len(shape) == 3:
        return shape[1], shape[0] * shape[2]
    raise ValueError(
        f"Fan in and fan out cannot be computed for a tensor of shape {tuple(shape)}: "
        "pass a bias, a [d_in, d_out] matrix or a [n_heads, d_model, d_head] attention weight."
    )


def init_xavier_uniform_(param: Tensor, gain: float = 1.0) -> Tensor:
    """Fill ``param`` in place from U(-a, a), ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = calc_fan_in_and_fan_out(param)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return nn.init.uniform_(param, -bound, bound)


def init_xavier_normal_(param: Tensor, gain: float = 1.0) -> Tensor:
    """Fill ``param`` in place from N(0, std²), ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = calc_fan_in_and_fan_out(param)
    return nn.init.normal_(param, mean=0.0, std=gain * math.sqrt(2.0 / (fan_in + fan_out)))


def _kaiming_gain(param: Tensor, a: float, nonlinearity: str, gain: float, mode: str) -> float:
    fan_in, fan_out = calc_fan_in_and_fan_out(param)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}.")
    fan = fan_in if mode == "fan_in" else fan_out
    return gain * nn.init.calculate_gain(nonlinearity, a) / math.sqrt(fan)


def init_kaiming_uniform_(
    param: Tensor,
    a: float = 0,
    nonlinearity: Nonlinearity = "relu",
    gain: float = 1.0,
    mode: str = "fan_in",
) -> Tensor:
    """Fill ``param`` in place from U(-b, b), ``b = gain * calculate_gain(nonlinearity, a) *
    sqrt(3 / fan)`` (``fan`` per ``mode``).

    Example:
        >>> init_kaiming_uniform_(torch.empty(64, 256), nonlinearity="relu").abs().max() <= 0.3062
        tensor(True)
    """
    bound = math.sqrt(3.0) * _kaiming_gain(param, a, nonlinearity, gain, mode)
    return nn.init.uniform_(param, -bound, bound)


def init_kaiming_normal_(
    param: Tensor,
    a: float = 0,
    nonlinearity: Nonlinearity = "relu",
    gain: float = 1.0,
    mode: str = "fan_in",
) -> Tensor:
    """Fill ``param`` in place from N(0, std²), ``std = gain * calculate_gain(nonlinearity, a)
    / sqrt(fan)`` (``fan`` per ``mode``)."""
    return nn.init.normal_(param, mean=0.0, std=_kaiming_gain(param, a, nonlinearity, gain, mode))
