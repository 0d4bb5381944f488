"""circuit-tracer's ``transcoder.activation_functions``: ``JumpReLU`` and ``TopK`` as modules.

``JumpReLU(threshold)(x)`` keeps ``x`` where ``x > threshold`` (circuit-tracer's rule: not
ReLU'd first, so a negative threshold keeps negative values); ``TopK(k)(x)`` keeps the ``k``
largest entries of the last axis and zeroes the rest (not ReLU'd either).

Example:
    >>> JumpReLU(torch.tensor([1.0, 0.5]))(torch.tensor([0.8, 0.8]))
    tensor([0.0000, 0.8000])
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class JumpReLU(nn.Module):
    """``x * (x > threshold)``; ``threshold`` a parameter (a scalar or one per feature).
    ``bandwidth`` is circuit-tracer's training parameter, kept for its constructor."""

    def __init__(self, threshold: float | Tensor, bandwidth: float = 2.0) -> None:
        super().__init__()
        self.threshold = nn.Parameter(torch.as_tensor(threshold))
        self.bandwidth = bandwidth

    def forward(self, x: Tensor) -> Tensor:
        return x * (x > self.threshold).to(x.dtype)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, bandwidth={self.bandwidth}"


class TopK(nn.Module):
    """Keep the ``k`` largest values of the last axis, zero the others."""

    def __init__(self, k: int) -> None:
        super().__init__()
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"TopK needs a positive int k; got {k!r}.")
        self.k = k

    def forward(self, x: Tensor) -> Tensor:
        _, indices = torch.topk(x, k=min(self.k, x.shape[-1]), dim=-1)
        keep = torch.zeros_like(x).scatter_(-1, indices, 1.0)
        return x * keep

    def extra_repr(self) -> str:
        return f"k={self.k}"
